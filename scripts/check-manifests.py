#!/usr/bin/env python3
"""Checks the deployment files of df11-serve without a cluster (schema-less, python3-yaml).

Parses every YAML file under deploy/ and checks what we rely on:
  Kubernetes (deploy/kubernetes/): each object has apiVersion/kind/metadata.name and the
    app.kubernetes.io/name label; the Deployment's selector matches its pod labels; a GPU limit;
    requests and limits; startup/readiness/liveness probes of type grpc on the gRPC container
    port, the startup probe allowing >= 10 minutes; securityContext non-root, read-only root
    filesystem, no privilege escalation, capabilities drop ALL; mounts name existing volumes;
    /models and the PVC read-only; the ConfigMap/PVC referenced exist; the --config file is a
    ConfigMap key holding a models list under /models; terminationGracePeriodSeconds covers
    preStop + df11d's drain grace; every DF11D_* variable names a real df11d flag (server/config.cc);
    the Service selects the pods and targets real container ports (grpc 50051, metrics 8000);
    ServiceMonitor/PodMonitor select them and name a real port; the HPA scales an existing
    Deployment on metrics df11d exports (server/metrics*.cc); kustomization lists every file.
  Compose (deploy/compose/compose*.yaml): df11d, prometheus and grafana services; build context
    and Dockerfile exist; every bind-mounted host path exists; Prometheus scrapes a compose
    service's port and its rule glob matches files of deploy/prometheus/; Grafana gets dashboards.
  Dockerfile: non-root USER, ENTRYPOINT df11d, EXPOSE 50051 8000, HEALTHCHECK.
Exit 0 with "manifests: N files, 0 errors"; 1 with one line per error.
tests/deploy-k8s/self_test.py breaks the files in memory and checks that each break is reported.
"""
import glob
import json
import os
import re
import sys

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
KINDS = {"Deployment": "apps/v1", "Service": "v1", "ConfigMap": "v1", "PersistentVolumeClaim": "v1",
         "ServiceMonitor": "monitoring.coreos.com/v1", "PodMonitor": "monitoring.coreos.com/v1",
         "HorizontalPodAutoscaler": "autoscaling/v2"}
REQUIRED_KINDS = ["Deployment", "Service", "ConfigMap", "PersistentVolumeClaim", "HorizontalPodAutoscaler"]
GRPC_PORT, METRICS_PORT, MIN_STARTUP_SECONDS = 50051, 8000, 600


def load(root):
    """{relative path: [documents]} of every YAML under deploy/; parse errors raise SystemExit."""
    files = {}
    for path in sorted(glob.glob(os.path.join(root, "deploy", "**", "*.y*ml"), recursive=True)):
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8") as f:
                files[rel] = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            raise SystemExit(f"{rel}: YAML parse error: {e}")
    return files


def read_source(root, pattern):
    text = ""
    for path in sorted(glob.glob(os.path.join(root, pattern))):
        with open(path, encoding="utf-8") as f:
            text += f.read()
    return text


def df11d_env_names(root):
    """DF11D_<FLAG> of every flag registered in server/config.cc, or None when it is absent."""
    src = read_source(root, "server/config.cc")
    flags = re.findall(r'Flag\(app,\s*"([a-z0-9-]+)"', src)
    return {"DF11D_" + f.upper().replace("-", "_") for f in flags} or None


def default_drain_grace(root):
    m = re.search(r"drain_grace_seconds\s*=\s*([0-9.]+)", read_source(root, "server/config.h"))
    return float(m.group(1)) if m else 30.0


class Checker:
    def __init__(self, root, files):
        self.root, self.files, self.errors = root, files, []
        self.objects = [(p, d) for p, docs in files.items() if p.startswith("deploy/kubernetes/")
                        for d in docs if isinstance(d, dict) and "kind" in d and d.get("kind") != "Kustomization"]

    def error(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def of_kind(self, kind):
        return [(p, d) for p, d in self.objects if d.get("kind") == kind]

    def named(self, kind, name):
        return [d for _, d in self.of_kind(kind) if d.get("metadata", {}).get("name") == name]

    # ---- Kubernetes ------------------------------------------------------------------------
    def check_objects(self):
        for path, d in self.objects:
            meta = d.get("metadata") or {}
            where = f"{path}: {d.get('kind')}/{meta.get('name')}"
            if d["kind"] not in KINDS:
                self.error(where, f"unexpected kind (expected one of {sorted(KINDS)})")
            elif d.get("apiVersion") != KINDS[d["kind"]]:
                self.error(where, f"apiVersion {d.get('apiVersion')!r}, expected {KINDS[d['kind']]!r}")
            if not meta.get("name"):
                self.error(where, "metadata.name missing")
            if "app.kubernetes.io/name" not in (meta.get("labels") or {}):
                self.error(where, "metadata.labels lacks app.kubernetes.io/name")
        kinds = {d["kind"] for _, d in self.objects}
        for kind in REQUIRED_KINDS:
            if kind not in kinds:
                self.error("deploy/kubernetes", f"no {kind}")
        if not kinds & {"ServiceMonitor", "PodMonitor"}:
            self.error("deploy/kubernetes", "no ServiceMonitor or PodMonitor")

    def check_deployment(self, path, d, env_names, drain_default):
        where = f"{path}: Deployment/{d['metadata'].get('name')}"
        spec = d.get("spec") or {}
        pod = (spec.get("template") or {}).get("spec") or {}
        pod_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if not selector or any(pod_labels.get(k) != v for k, v in selector.items()):
            self.error(where, f"spec.selector.matchLabels {selector} does not match the pod labels {pod_labels}")
        psc = pod.get("securityContext") or {}
        if psc.get("runAsNonRoot") is not True or psc.get("runAsUser") in (None, 0):
            self.error(where, "pod securityContext must set runAsNonRoot: true and a non-zero runAsUser")
        volumes = {v.get("name"): v for v in pod.get("volumes") or []}
        for v in volumes.values():
            if "persistentVolumeClaim" in v:
                pvc = v["persistentVolumeClaim"]
                if not self.named("PersistentVolumeClaim", pvc.get("claimName")):
                    self.error(where, f"volume {v['name']}: PVC {pvc.get('claimName')!r} is not defined")
                if pvc.get("readOnly") is not True:
                    self.error(where, f"volume {v['name']}: persistentVolumeClaim.readOnly must be true")
            if "configMap" in v and not self.named("ConfigMap", v["configMap"].get("name")):
                self.error(where, f"volume {v['name']}: ConfigMap {v['configMap'].get('name')!r} is not defined")
        containers = pod.get("containers") or []
        if not containers:
            self.error(where, "no containers")
        for c in containers:
            self.check_container(f"{where}: container {c.get('name')}", c, volumes, env_names)
        main = containers[0] if containers else {}
        grace = drain_default
        for e in main.get("env") or []:
            if e.get("name") == "DF11D_DRAIN_GRACE_SECONDS":
                grace = float(e.get("value"))
        pre_stop = (((main.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
        pre = float(pre_stop[-1]) if pre_stop and "sleep" in pre_stop[0] else 0.0
        term = pod.get("terminationGracePeriodSeconds", 30)
        if term < grace + pre:
            self.error(where, f"terminationGracePeriodSeconds {term} < preStop {pre:g} s + drain grace {grace:g} s")
        return pod_labels, main

    def check_container(self, where, c, volumes, env_names):
        if not c.get("image"):
            self.error(where, "no image")
        res = c.get("resources") or {}
        if not res.get("requests") or not res.get("limits"):
            self.error(where, "resources.requests and resources.limits are required")
        if int((res.get("limits") or {}).get("nvidia.com/gpu", 0)) < 1:
            self.error(where, "resources.limits lacks nvidia.com/gpu")
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            self.error(where, "securityContext.allowPrivilegeEscalation must be false")
        if sc.get("readOnlyRootFilesystem") is not True:
            self.error(where, "securityContext.readOnlyRootFilesystem must be true")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            self.error(where, "securityContext.capabilities.drop must include ALL")
        if sc.get("privileged"):
            self.error(where, "must not be privileged")
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
        if ports.get("grpc") != GRPC_PORT or ports.get("metrics") != METRICS_PORT:
            self.error(where, f"ports must name grpc {GRPC_PORT} and metrics {METRICS_PORT}, got {ports}")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            p = c.get(probe)
            if not p:
                self.error(where, f"no {probe}")
            elif (p.get("grpc") or {}).get("port") not in (GRPC_PORT,):
                self.error(where, f"{probe} must be a grpc probe on port {GRPC_PORT}")
        sp = c.get("startupProbe") or {}
        if sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3) < MIN_STARTUP_SECONDS:
            self.error(where, f"startupProbe allows less than {MIN_STARTUP_SECONDS} s for loading")
        mounts = {m.get("mountPath"): m for m in c.get("volumeMounts") or []}
        for m in mounts.values():
            if m.get("name") not in volumes:
                self.error(where, f"volumeMount {m.get('name')!r} names no volume")
        if (mounts.get("/models") or {}).get("readOnly") is not True:
            self.error(where, "/models must be mounted readOnly: true")
        if env_names is not None:
            for e in c.get("env") or []:
                if e.get("name", "").startswith("DF11D_") and e["name"] not in env_names:
                    self.error(where, f"env {e['name']} is no df11d flag (server/config.cc)")
        self.check_config_arg(where, c, mounts, volumes)

    def check_config_arg(self, where, c, mounts, volumes):
        args = c.get("args") or []
        if "--config" not in args or args.index("--config") + 1 >= len(args):
            return
        path = args[args.index("--config") + 1]
        mount = mounts.get(os.path.dirname(path))
        cm = volumes.get((mount or {}).get("name"), {}).get("configMap")
        maps = self.named("ConfigMap", (cm or {}).get("name"))
        data = (maps[0].get("data") or {}) if maps else {}
        key = os.path.basename(path)
        if key not in data:
            self.error(where, f"--config {path}: no ConfigMap key {key!r} mounted at {os.path.dirname(path)}")
            return
        try:
            models = json.loads(data[key])["models"]
        except (ValueError, KeyError, TypeError) as e:
            self.error(where, f"--config {path}: not a JSON object with \"models\": {e}")
            return
        for m in models:
            if not str(m.get("path", "")).startswith("/models/") or not m.get("name"):
                self.error(where, f"--config {path}: model {m} needs a name and a path under /models/")

    def check_service(self, path, d, pod_labels, container):
        where = f"{path}: Service/{d['metadata'].get('name')}"
        sel = (d.get("spec") or {}).get("selector") or {}
        if not sel or any(pod_labels.get(k) != v for k, v in sel.items()):
            self.error(where, f"selector {sel} does not select the Deployment's pods {pod_labels}")
        cports = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
        got = {}
        for p in (d.get("spec") or {}).get("ports") or []:
            t = p.get("targetPort", p.get("port"))
            if t not in cports and t not in cports.values():
                self.error(where, f"port {p.get('name')}: targetPort {t!r} is no container port")
            got[p.get("name")] = p.get("port")
        if got.get("grpc") != GRPC_PORT or got.get("metrics") != METRICS_PORT:
            self.error(where, f"ports must name grpc {GRPC_PORT} and metrics {METRICS_PORT}, got {got}")

    def check_monitors(self, pod_labels, container):
        services = [d for _, d in self.of_kind("Service")]
        for path, d in self.of_kind("ServiceMonitor") + self.of_kind("PodMonitor"):
            where = f"{path}: {d['kind']}/{d['metadata'].get('name')}"
            sel = ((d.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if d["kind"] == "ServiceMonitor":
                targets = [s for s in services if all((s["metadata"].get("labels") or {}).get(k) == v
                                                      for k, v in sel.items())]
                names = {p.get("name") for s in targets for p in (s.get("spec") or {}).get("ports") or []}
                endpoints = (d.get("spec") or {}).get("endpoints") or []
            else:
                targets = [pod_labels] if all(pod_labels.get(k) == v for k, v in sel.items()) else []
                names = {p.get("name") for p in container.get("ports") or []}
                endpoints = (d.get("spec") or {}).get("podMetricsEndpoints") or []
            if not sel or not targets:
                self.error(where, f"selector {sel} matches nothing")
            if not endpoints:
                self.error(where, "no endpoints")
            for e in endpoints:
                if e.get("port") not in names:
                    self.error(where, f"endpoint port {e.get('port')!r} is not one of {sorted(names)}")

    def check_hpa(self, metric_source):
        for path, d in self.of_kind("HorizontalPodAutoscaler"):
            where = f"{path}: HorizontalPodAutoscaler/{d['metadata'].get('name')}"
            spec = d.get("spec") or {}
            ref = spec.get("scaleTargetRef") or {}
            if ref.get("kind") != "Deployment" or not self.named("Deployment", ref.get("name")):
                self.error(where, f"scaleTargetRef {ref} names no Deployment defined here")
            if not 1 <= spec.get("minReplicas", 1) <= spec.get("maxReplicas", 0):
                self.error(where, "needs 1 <= minReplicas <= maxReplicas")
            for m in spec.get("metrics") or []:
                name = ((m.get(m.get("type", "").lower()) or {}).get("metric") or {}).get("name")
                if m.get("type") in ("Pods", "Object", "External") and metric_source and \
                        f'"{name}"' not in metric_source:
                    self.error(where, f"metric {name!r} is not exported by df11d (server/metrics*.cc)")

    def check_kustomization(self):
        for path, docs in self.files.items():
            if os.path.basename(path) != "kustomization.yaml":
                continue
            listed = set((docs[0] or {}).get("resources") or [])
            here = os.path.dirname(path)
            for r in listed:
                if not os.path.exists(os.path.join(self.root, here, r)):
                    self.error(path, f"resource {r} does not exist")
            for p in self.files:
                if os.path.dirname(p) == here and p != path and os.path.basename(p) not in listed:
                    self.error(path, f"{os.path.basename(p)} is not listed in resources")

    def check_kubernetes(self):
        self.check_objects()
        env_names, drain = df11d_env_names(self.root), default_drain_grace(self.root)
        for path, d in self.of_kind("Deployment"):
            pod_labels, main = self.check_deployment(path, d, env_names, drain)
            for spath, s in self.of_kind("Service"):
                self.check_service(spath, s, pod_labels, main)
            self.check_monitors(pod_labels, main)
        self.check_hpa(read_source(self.root, "server/metrics*.cc"))
        self.check_kustomization()

    # ---- compose and Dockerfile ------------------------------------------------------------
    def host_path(self, compose_dir, spec):
        """The host side of a bind mount; None for named volumes and for paths the user sets
        through a variable (${VAR:-default}: the default need not exist on every checkout)."""
        host = spec.split(":")[0]
        if spec.startswith("${") or not host.startswith((".", "/")):
            return None
        return os.path.normpath(os.path.join(compose_dir, host))

    def check_compose(self):
        for path, docs in self.files.items():
            if not re.match(r"deploy/compose/compose[^/]*\.ya?ml$", path):
                continue
            services = (docs[0] or {}).get("services") or {}
            cdir = os.path.join(self.root, os.path.dirname(path))
            if os.path.basename(path) in ("compose.yaml", "compose.yml"):
                for name in ("df11d", "prometheus", "grafana"):
                    if name not in services:
                        self.error(path, f"no service {name!r}")
            for name, s in services.items():
                build = (s or {}).get("build") or {}
                if "context" in build:
                    ctx = os.path.join(cdir, build["context"])
                    if not os.path.isfile(os.path.join(ctx, build.get("dockerfile", "Dockerfile"))):
                        self.error(path, f"service {name}: no Dockerfile in build context {build['context']}")
                for v in (s or {}).get("volumes") or []:
                    host = self.host_path(cdir, v if isinstance(v, str) else v.get("source", ""))
                    if host and not os.path.exists(host):
                        self.error(path, f"service {name}: mounted host path {v.split(':')[0]} does not exist")
        self.check_compose_prometheus()

    def check_compose_prometheus(self):
        prom = self.files.get("deploy/compose/prometheus.yml")
        if not prom:
            return
        ports = {"df11d": METRICS_PORT}
        for job in prom[0].get("scrape_configs") or []:
            for sc in job.get("static_configs") or []:
                for t in sc.get("targets") or []:
                    host, _, port = t.partition(":")
                    if ports.get(host) != int(port or 0):
                        self.error("deploy/compose/prometheus.yml", f"target {t} is not df11d:{METRICS_PORT}")
        rules_dir = os.path.join(self.root, "deploy", "prometheus")
        for pattern in prom[0].get("rule_files") or []:
            matched = glob.glob(pattern.replace("/etc/prometheus/df11", rules_dir))
            if not matched:
                self.error("deploy/compose/prometheus.yml", f"rule_files {pattern} matches no file of deploy/prometheus")
            for m in matched:
                with open(m, encoding="utf-8") as f:
                    if "groups" not in (yaml.safe_load(f) or {}):
                        self.error("deploy/compose/prometheus.yml", f"rule_files {pattern}: {m} has no rule groups")
        self.check_compose_grafana()

    def check_compose_grafana(self):
        """Every datasource uid the dashboards name is provisioned by the compose Grafana."""
        provided = {d.get("uid") for p, docs in self.files.items()
                    if p.startswith("deploy/compose/grafana/provisioning/datasources/")
                    for d in (docs[0] or {}).get("datasources") or []}
        dashboards = glob.glob(os.path.join(self.root, "deploy", "grafana", "*.json"))
        if not dashboards:
            self.error("deploy/grafana", "no dashboard *.json for Grafana to provision")
        for path in dashboards:
            with open(path, encoding="utf-8") as f:
                wanted = set(re.findall(r'"datasource":\s*\{[^}]*"uid":\s*"([^"$]+)"', f.read()))
            for uid in sorted(wanted - provided - {"-- Grafana --", "grafana"}):
                self.error(os.path.relpath(path, self.root), f"datasource uid {uid!r} is not provisioned by "
                           "deploy/compose/grafana/provisioning/datasources/")

    def check_dockerfile(self):
        with open(os.path.join(self.root, "Dockerfile"), encoding="utf-8") as f:
            text = f.read()
        final = text[text.rfind("\nFROM "):]
        if not re.search(r"^USER\s+(?!root\b|0\b)\S+", final, re.M):
            self.error("Dockerfile", "the final stage needs a non-root USER")
        if not re.search(r'^ENTRYPOINT\s+\[\s*"[^"]*/df11d"', final, re.M):
            self.error("Dockerfile", "ENTRYPOINT must be df11d")
        exposed = set(re.findall(r"^EXPOSE\s+(.*)$", final, re.M)[0].split()) if "EXPOSE" in final else set()
        if exposed != {str(GRPC_PORT), str(METRICS_PORT)}:
            self.error("Dockerfile", f"EXPOSE must be {GRPC_PORT} {METRICS_PORT}, got {sorted(exposed)}")
        if "HEALTHCHECK" not in final:
            self.error("Dockerfile", "no HEALTHCHECK")

    def run(self):
        self.check_kubernetes()
        self.check_compose()
        self.check_dockerfile()
        return self.errors


def main():
    root = os.environ.get("DF11_ROOT", ROOT)
    files = load(root)
    errors = Checker(root, files).run()
    for e in errors:
        print(e)
    print(f"manifests: {len(files)} files, {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
