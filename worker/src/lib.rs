//! loadgen-worker: the wire vocabulary (records, rings) and the worker process's HTTP/1.1 client.
