#!/usr/bin/env python3
"""Self-test of scripts/check-manifests.py: the committed deploy files must pass, and each known
way of breaking them (applied in memory to a copy) must be reported with the expected message.
Prints "check-manifests self-test: N passed, M failed"; exit 1 when any break goes unreported."""
import copy
import importlib.util
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
spec = importlib.util.spec_from_file_location("check_manifests", os.path.join(ROOT, "scripts", "check-manifests.py"))
cm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cm)


def k8s(files, kind):
    return next(d for p, docs in files.items() if p.startswith("deploy/kubernetes/") for d in docs
                if isinstance(d, dict) and d.get("kind") == kind)


def container(files):
    return k8s(files, "Deployment")["spec"]["template"]["spec"]["containers"][0]


# (expected text in an error, how the files are broken)
BREAKS = [
    ("readOnlyRootFilesystem", lambda f: container(f)["securityContext"].pop("readOnlyRootFilesystem")),
    ("allowPrivilegeEscalation", lambda f: container(f)["securityContext"].update(allowPrivilegeEscalation=True)),
    ("capabilities.drop", lambda f: container(f)["securityContext"]["capabilities"].update(drop=[])),
    ("runAsNonRoot", lambda f: k8s(f, "Deployment")["spec"]["template"]["spec"]["securityContext"].pop("runAsNonRoot")),
    ("readinessProbe", lambda f: container(f)["readinessProbe"].update(grpc={"port": 8000})),
    ("livenessProbe", lambda f: container(f).pop("livenessProbe")),
    ("startupProbe allows", lambda f: container(f)["startupProbe"].update(failureThreshold=3)),
    ("nvidia.com/gpu", lambda f: container(f)["resources"]["limits"].pop("nvidia.com/gpu")),
    ("/models must be mounted", lambda f: [m.update(readOnly=False) for m in container(f)["volumeMounts"]]),
    ("terminationGracePeriodSeconds", lambda f: k8s(f, "Deployment")["spec"]["template"]["spec"].update(
        terminationGracePeriodSeconds=20)),
    ("spec.selector.matchLabels", lambda f: k8s(f, "Deployment")["spec"]["selector"]["matchLabels"].update(x="y")),
    ("does not select", lambda f: k8s(f, "Service")["spec"]["selector"].update(x="y")),
    ("targetPort", lambda f: k8s(f, "Service")["spec"]["ports"][0].update(targetPort="http")),
    ("is no df11d flag", lambda f: container(f)["env"].append({"name": "DF11D_NO_SUCH_FLAG", "value": "1"})),
    ("no ConfigMap key", lambda f: k8s(f, "ConfigMap").update(data={})),
    ("scaleTargetRef", lambda f: k8s(f, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"].update(name="nope")),
    ("is not exported by df11d", lambda f: k8s(f, "HorizontalPodAutoscaler")["spec"]["metrics"][0]["pods"]["metric"]
     .update(name="df11_no_such_metric")),
    ("endpoint port", lambda f: k8s(f, "ServiceMonitor")["spec"]["endpoints"][0].update(port="nope")),
    ("does not exist", lambda f: f["deploy/compose/compose.yaml"][0]["services"]["prometheus"]["volumes"].append(
        "./no-such-file.yml:/etc/x:ro")),
    ("no service 'grafana'", lambda f: f["deploy/compose/compose.yaml"][0]["services"].pop("grafana")),
    ("is not provisioned", lambda f: f["deploy/compose/grafana/provisioning/datasources/prometheus.yaml"][0][
        "datasources"][0].update(uid="other")),
    ("matches no file", lambda f: f["deploy/compose/prometheus.yml"][0].update(rule_files=["/etc/prometheus/df11/x.yml"])),
    ("has no rule groups", lambda f: f["deploy/compose/prometheus.yml"][0].update(
        rule_files=["/etc/prometheus/df11/rules_test.yml"])),
    ("is not df11d", lambda f: f["deploy/compose/prometheus.yml"][0]["scrape_configs"][0]["static_configs"][0].update(
        targets=["df11d:9000"])),
]


def self_test(root, files):
    base = cm.Checker(root, files).run()
    if base:
        print("self-test: the committed files already fail:\n  " + "\n  ".join(base))
        return 1
    missed = []
    for expected, brk in BREAKS:
        broken = copy.deepcopy(files)
        brk(broken)
        errors = cm.Checker(root, broken).run()
        if not any(expected in e for e in errors):
            missed.append(f"{expected!r} not reported (errors: {errors})")
    for m in missed:
        print("self-test: MISSED " + m)
    print(f"check-manifests self-test: {len(BREAKS) - len(missed)} passed, {len(missed)} failed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(self_test(ROOT, cm.load(ROOT)))
