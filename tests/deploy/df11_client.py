"""A minimal df11.v1 gRPC client for the end-to-end metrics check and the scrape benchmark.

Stubs are generated at run time from proto/df11.proto with Debian's protoc and
grpc_python_plugin (python3-grpcio + protobuf-compiler-grpc), so nothing generated is committed.
"""
import importlib
import os
import subprocess
import sys
import tempfile


def load_stubs(repo_root):
    """Returns (df11_pb2, df11_pb2_grpc) compiled from <repo_root>/proto/df11.proto."""
    out = tempfile.mkdtemp(prefix="df11_stubs_")
    plugin = subprocess.run(["which", "grpc_python_plugin"], capture_output=True, text=True).stdout.strip()
    if not plugin:
        raise RuntimeError("grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)")
    subprocess.run(["protoc", f"-I{repo_root}/proto", f"--python_out={out}", f"--grpc_python_out={out}",
                    f"--plugin=protoc-gen-grpc_python={plugin}", f"{repo_root}/proto/df11.proto"], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("df11_pb2"), importlib.import_module("df11_pb2_grpc")


class Client:
    def __init__(self, repo_root, address):
        import grpc  # Debian python3-grpcio
        self.pb, grpc_stubs = load_stubs(repo_root)
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.generation = grpc_stubs.GenerationStub(self.channel)

    def generate(self, model, token_ids, max_tokens):
        """Greedy generation from token ids, ignoring EOS. Returns (generated ids, final message)."""
        request = self.pb.GenerateRequest(model=model, tokens=self.pb.TokenIds(ids=token_ids),
                                          max_tokens=max_tokens, ignore_eos=True,
                                          sampling=self.pb.SamplingParams(temperature=0.0))
        ids, last = [], None
        for response in self.generation.Generate(request, timeout=120):
            ids.extend(response.token_ids)
            last = response
        return ids, last

    def generate_stream(self, model, token_ids, max_tokens):
        """The streaming call itself (an iterator that can be cancelled)."""
        request = self.pb.GenerateRequest(model=model, tokens=self.pb.TokenIds(ids=token_ids),
                                          max_tokens=max_tokens, ignore_eos=True,
                                          sampling=self.pb.SamplingParams(temperature=0.0))
        return self.generation.Generate(request, timeout=300)

    def models(self):
        return list(self.generation.ListModels(self.pb.ListModelsRequest(), timeout=30).models)


def wait_serving(client, model, timeout_s=60):
    """Waits until `model` is listed as READY."""
    import time
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for m in client.models():
            if m.name == model and m.state == client.pb.MODEL_STATE_READY:
                return m
        time.sleep(0.1)
    raise RuntimeError(f"model {model} not READY after {timeout_s} s")


if __name__ == "__main__":
    print(os.path.basename(__file__), "is a module")
