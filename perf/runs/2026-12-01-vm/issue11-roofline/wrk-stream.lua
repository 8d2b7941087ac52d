wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.body = "{\"model\":\"max-tp\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
wrk.headers["Content-Type"] = "application/json"
