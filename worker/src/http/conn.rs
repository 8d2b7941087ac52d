//! One keep-alive connection and the exchange of one request and its response.
