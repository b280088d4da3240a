"""OpenAI-compatible servers for indolm's API backend (crates/eval/src/generate/backend/openai.rs): a real one,
`transformers serve` on a tiny local model on the CPU, the server's own answers fetched with the
`openai` client, and a fake one (the standard library's http.server) that answers as a busy or
broken server does. The servers run as scripts (`python openai_server.py serve|fake ...`, standard
library imports at the top so the fake one starts at once); `openai-chat` is a subcommand of
hf_reference.py.

  serve DIR PORT          `transformers serve DIR --device cpu --host 127.0.0.1 --port PORT` (the same
                          Serve class the command line builds, DIR preloaded), in a thread; the process
                          ends when its stdin closes (the test that started it ended, however it ended).
  openai-chat BASE_URL REQUESTS OUT  the `openai` client's `chat.completions.create(**request)` for each
                          request of REQUESTS (JSON, a list of keyword dicts: model, messages, temperature,
                          max_tokens, seed), one at a time against BASE_URL (api_key "unused"). OUT JSON, a
                          request each: {"text": message.content, "finish_reason", "completion_tokens"}.
  fake LOG                an OpenAI-compatible /chat/completions on a free port of 127.0.0.1, printed
                          first on stdout ({"port": N}); each request logged to LOG as a JSON line
                          {"time", "authorization", "body"}. The last user message decides the answer:
                          "busy" answers 429 with Retry-After: 1 on its first request, then 200; "flaky"
                          503 without Retry-After, then 200; "down" 503 with Retry-After: 0 every time;
                          "bad" 400 with an OpenAI error object; "slow" waits 0.4 s; "echo-key" 200 with
                          the Authorization header in its text; "latin1" 200 with a body that is not UTF-8;
                          "odd-content" 200 whose content is [42]; anything else 200 at once. A 200 answers
                          "echo: CONTENT" with finish_reason "length" when max_tokens is 3, else "stop", and
                          usage.completion_tokens 3. Ends when its stdin closes.
"""
import json
import os
import sys
import threading
import time


def _exit_when_stdin_closes():
    """Blocks until stdin closes, then ends the process at once (server threads and all)."""
    try:
        sys.stdin.read()
    finally:
        os._exit(0)


def serve(model_dir, port):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.cli.serve import Serve

    Serve(force_model=model_dir, device="cpu", host="127.0.0.1", port=int(port), non_blocking=True)
    _exit_when_stdin_closes()


def chat(base_url, requests_path, out_path):
    from openai import OpenAI

    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]:
        os.environ.pop(name, None)  # the server is on 127.0.0.1
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
    out = []
    for request in json.load(open(requests_path)):
        completion = client.chat.completions.create(**request)
        choice = completion.choices[0]
        usage = completion.usage
        out.append({"text": choice.message.content, "finish_reason": choice.finish_reason,
                    "completion_tokens": usage.completion_tokens if usage else None})
    with open(out_path, "w") as f:
        json.dump(out, f)


def fake(log_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = {}
    lock = threading.Lock()
    log = open(log_path, "a")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body, headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            authorization = self.headers.get("Authorization")
            with lock:
                log.write(json.dumps({"time": time.time(), "path": self.path, "authorization": authorization,
                                      "body": body}) + "\n")
                log.flush()
                content = body["messages"][-1]["content"]
                seen[content] = seen.get(content, 0) + 1
                first = seen[content] == 1
            if content == "busy" and first:
                return self.answer(429, {"error": {"message": "Rate limit reached, slow down"}}, [("Retry-After", "1")])
            if content == "flaky" and first:
                return self.answer(503, {"error": {"message": "overloaded"}})
            if content == "down":
                return self.answer(503, {"error": {"message": "the engine is down"}}, [("Retry-After", "0")])
            if content == "bad":
                return self.answer(400, {"error": {"message": "Unsupported value: 'temperature' does not support 0",
                                                   "type": "invalid_request_error", "param": "temperature"}})
            if content == "latin1":
                data = '{"choices": [{"message": {"content": "caf\xe9"}, "finish_reason": "stop"}]}'.encode("latin-1")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if content == "odd-content":
                return self.answer(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": [42]},
                                                      "finish_reason": "stop"}]})
            if content == "slow":
                time.sleep(0.4)
            text = f"echo: {content}" if content != "echo-key" else f"echo: {authorization}"
            length = body.get("max_tokens") == 3
            self.answer(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "length" if length else "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            })

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _exit_when_stdin_closes()


if __name__ == "__main__":
    commands = {"serve": serve, "fake": fake}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
