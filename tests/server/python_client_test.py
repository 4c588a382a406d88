#!/usr/bin/env python3
"""A Python gRPC client talks to the real df11d: the API is usable outside C++.

Generates df11_pb2.py with `protoc --python_out` at test time, serves a DF11-compressed tiny random
model (made with `df11 random-model` + `df11 compress`, tokenizer from tests/fixtures), then calls
Generate (server streaming), Tokenize, ListModels, grpc.health.v1 Check and server reflection
through grpcio's generic channel methods (Debian python3-grpcio + python3-protobuf only).
"""
import argparse
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc


_port_locks = []  # held until the process exits


def free_port():
    """A port below the ephemeral range, locked as tests/server/daemon_test_util.h's FreePort() does.

    No bind(0) or outgoing connection of another process can take it before df11d binds it, and the
    flock on /tmp/df11-test-port-<port>.lock keeps test processes running side by side apart.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low, high = 10000, max(11000, ephemeral_low)
    start = random.randrange(high - low)
    for i in range(high - low):
        port = low + (start + i) % (high - low)
        lock = open(f"/tmp/df11-test-port-{port}.lock", "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            lock.close()
            continue
        _port_locks.append(lock)
        return port
    raise RuntimeError("no free port below the ephemeral range")


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--df11d", "--df11", "--protoc", "--proto-root", "--tokenizer"):
        ap.add_argument(flag, required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="df11_pyclient_")
    daemon = None
    try:
        subprocess.run([args.protoc, "-I", args.proto_root, "--python_out", tmp,
                        os.path.join(args.proto_root, "proto", "df11.proto")], check=True)
        sys.path.insert(0, os.path.join(tmp, "proto"))
        import df11_pb2 as pb  # noqa: E402

        bf16, df11 = os.path.join(tmp, "bf16"), os.path.join(tmp, "df11")
        subprocess.run([args.df11, "random-model", "qwen3-tiny", bf16], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.df11, "compress", bf16, df11], check=True, stdout=subprocess.DEVNULL)
        for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            shutil.copy(os.path.join(args.tokenizer, name), df11)

        port = free_port()
        log = open(os.path.join(tmp, "df11d.log"), "w")
        daemon = subprocess.Popen([args.df11d, "--grpc-address", f"127.0.0.1:{port}", "--metrics-address", "",
                                   "--kv-memory-bytes", str(32 << 20), "--threads", "1", "--log-format", "json",
                                   "--model", f"tiny={df11}"], stdout=log, stderr=log)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")

        # grpc.health.v1.Health/Check, messages encoded by hand: HealthCheckRequest{service=""}.
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        deadline = time.time() + 60
        while True:
            try:
                if check(b"", timeout=2) == b"\x08\x01":  # status: SERVING
                    break
            except grpc.RpcError:
                pass
            if time.time() > deadline or daemon.poll() is not None:
                raise SystemExit("df11d did not become SERVING:\n" + open(log.name).read())
            time.sleep(0.05)

        generate = channel.unary_stream("/df11.v1.Generation/Generate",
                                        request_serializer=pb.GenerateRequest.SerializeToString,
                                        response_deserializer=pb.GenerateResponse.FromString)
        request = pb.GenerateRequest(model="tiny", text=b" hello world", max_tokens=16, ignore_eos=True,
                                     request_id="py-1", sampling=pb.SamplingParams(temperature=1.0, seed=3))
        text, ids, last = "", [], None
        for msg in generate(request, timeout=60):
            text += msg.text
            ids += list(msg.token_ids)
            assert msg.request_id == "py-1", msg.request_id
            last = msg
        assert len(ids) == 16, ids
        assert last.finish_reason == pb.FINISH_REASON_LENGTH, last
        assert last.usage.completion_tokens == 16, last.usage
        assert text, "no text generated"
        print("python client generated:", repr(text))

        tokenize = channel.unary_unary("/df11.v1.Generation/Tokenize",
                                       request_serializer=pb.TokenizeRequest.SerializeToString,
                                       response_deserializer=pb.TokenizeResponse.FromString)
        assert list(tokenize(pb.TokenizeRequest(model="tiny", text=b" hello"), timeout=10).ids), "empty tokenization"

        list_models = channel.unary_unary("/df11.v1.Generation/ListModels",
                                          request_serializer=pb.ListModelsRequest.SerializeToString,
                                          response_deserializer=pb.ListModelsResponse.FromString)
        models = list_models(pb.ListModelsRequest(), timeout=10).models
        assert [m.name for m in models] == ["tiny"], models
        assert models[0].df11 and 0 < models[0].compression_ratio < 1, models[0]

        try:
            list(generate(pb.GenerateRequest(model="missing", text=b"x"), timeout=10))
            raise AssertionError("unknown model accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e

        # Server reflection: ServerReflectionRequest{list_services: "*"} (field 7).
        reflect = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        reply = b"".join(reflect(iter([b"\x3a\x01*"]), timeout=10))
        for service in (b"df11.v1.Generation", b"df11.v1.Admin", b"grpc.health.v1.Health"):
            assert service in reply, (service, reply)

        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0, open(log.name).read()
        daemon = None
        # JSON log lines: one per request, each a JSON object.
        import json
        lines = [json.loads(l) for l in open(log.name) if l.startswith("{")]
        assert any(l.get("event") == "request" and l.get("request_id") == "py-1" and l.get("status") == "OK"
                   for l in lines), lines
        print("ok")
    finally:
        if daemon is not None:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
