"""Shutdown stress: a TLS + token bloom-server started and stopped with SIGTERM, many times.

Each cycle starts the server (port 0, fresh data dir), uses it through the Python client in one
of four ways, sends SIGTERM, and checks the exit status is 0 and that what was added reads as
present after a restart. The four ways time SIGTERM against the server's connections:
  0. no call at all;
  1. calls (one of them refused for a missing token), the channel closed, SIGTERM at once,
     while the server is still tearing the connection down (as the Python client test does);
  2. calls, then SIGTERM with the channel still open and idle;
  3. SIGTERM while a thread keeps adding (adds acknowledged before the stop must survive).
Busy loops keep every core loaded meanwhile. Meant for the AddressSanitizer build, where a
sanitizer report at exit turns the exit status into 1.

    /usr/bin/python3 tests/shutdown_stress.py --build build-address [--cycles 200] [--load N]

A failing cycle prints the server's log. The last line is 'N passed, N failed'; the exit
status is 1 if any cycle failed.
"""

import argparse
import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc


def make_secrets(directory):
    """TLS files (the Python client test's test CA) and a token file; returns the CA's PEM."""
    from test_bloom_client import make_tls_files
    ca, _, _ = make_tls_files(directory)
    with open(os.path.join(directory, "tokens"), "w") as f:
        f.write(hashlib.sha256(b"stress-writer").hexdigest() + " write stress\n")
    with open(ca, "rb") as f:
        return f.read()


class Server:
    def __init__(self, binary, secrets, data_dir, log_path):
        port_file = data_dir + ".port"
        if os.path.exists(port_file):
            os.remove(port_file)
        self.log_path = log_path
        self.log = open(log_path, "a")
        self.proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", f"--data_dir={data_dir}", f"--port_file={port_file}",
             f"--tls_cert_file={secrets}/server.crt", f"--tls_key_file={secrets}/server.key",
             f"--auth_token_file={secrets}/tokens"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("bloom-server did not start")
            time.sleep(0.005)
        with open(port_file) as f:
            self.target = f"127.0.0.1:{int(f.readline())}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.log.close()
        return code


def run_cycle(cycle, binary, secrets, roots, work):
    """Returns (ok, why)."""
    from bloom_client import BloomClient
    data_dir = os.path.join(work, f"data-{cycle}")
    log_path = os.path.join(work, f"log-{cycle}")
    mode = cycle % 4
    server = Server(binary, secrets, data_dir, log_path)
    client = None
    acknowledged = []
    try:
        if mode != 0:
            client = BloomClient(server.target, tls=True, root_certificates=roots,
                                 token="stress-writer")
            client.reserve("stress", capacity=10000, error_rate=0.01)
            client.add("stress", ["a", "b", "c"])
            acknowledged += ["a", "b", "c"]
            if client.might_contain("stress", ["a", "zz"]) != [True, False]:
                return False, "wrong answers before the stop"
            with BloomClient(server.target, tls=True, root_certificates=roots) as anonymous:
                try:
                    anonymous.stats("stress")
                    return False, "a call without a token was not refused"
                except grpc.RpcError as error:
                    if error.code() != grpc.StatusCode.UNAUTHENTICATED:
                        return False, f"a call without a token got {error.code()}"
        if mode == 1:
            client.close()
            client = None
        writer = None
        if mode == 3:
            def keep_adding():
                for i in range(100000):
                    try:
                        client.add("stress", [f"w{i}"])
                    except grpc.RpcError:
                        return
                    acknowledged.append(f"w{i}")
            writer = threading.Thread(target=keep_adding)
            writer.start()
            time.sleep(0.05)
        code = server.stop()
        if writer is not None:
            writer.join()
        if code != 0:
            return False, f"exit status {code} after SIGTERM"
    finally:
        if client is not None:
            client.close()
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
    if acknowledged:
        # Nothing acknowledged may be lost: restart on the same data and check.
        server = Server(binary, secrets, data_dir, log_path)
        with BloomClient(server.target, tls=True, root_certificates=roots,
                         token="stress-writer") as client:
            present = client.might_contain("stress", acknowledged)
        code = server.stop()
        if not all(present):
            return False, f"{present.count(False)} acknowledged adds read absent after restart"
        if code != 0:
            return False, f"exit status {code} after SIGTERM (restarted server)"
    return True, ""


def busy_loop():
    while True:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build-address")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--load", type=int, default=os.cpu_count())
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.join(root, args.build)
    sys.path[:0] = [os.path.join(build, "protos", "python"), os.path.join(root, "client", "python")]
    binary = os.path.join(build, "server", "bloom-server")
    if not os.access(binary, os.X_OK):
        sys.exit(f"no {binary}: build it first")

    loaders = [multiprocessing.Process(target=busy_loop, daemon=True) for _ in range(args.load)]
    for loader in loaders:
        loader.start()
    passed = failed = 0
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bloom-shutdown-stress-") as work:
        secrets = os.path.join(work, "secrets")
        os.mkdir(secrets)
        roots = make_secrets(secrets)
        try:
            for cycle in range(1, args.cycles + 1):
                try:
                    ok, why = run_cycle(cycle, binary, secrets, roots, work)
                except Exception as error:  # a failed start, a timeout: report, go on
                    ok, why = False, repr(error)
                if ok:
                    passed += 1
                    continue
                failed += 1
                with open(os.path.join(work, f"log-{cycle}"), errors="replace") as f:
                    log = f.read()[-16384:]
                print(f"cycle {cycle} (mode {cycle % 4}) failed: {why}\n"
                      f"---- bloom-server log ----\n{log}---- end of log ----", flush=True)
        finally:
            for loader in loaders:
                loader.terminate()
    print(f"shutdown stress: {args.cycles} cycles of a TLS + token server ({args.build}), "
          f"{args.load} busy loops, {time.time() - started:.0f} s")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
