#!/usr/bin/env python3
"""Structural checks of the Grafana dashboard, its provisioning and the alert rules (no Grafana
or Prometheus server needed).

usage: check_deploy.py <repo root>
Fails (exit 1, one line per problem) when: the JSON does not parse; a panel has no targets, a
target has no expr or a duplicate refId, panel ids repeat or a panel lacks gridPos; a datasource
uid differs from the provisioned Prometheus datasource's uid; an expr names a df11_ metric that
docs/metrics.md does not list; brackets of an expr do not balance; an alert rule names an undocumented df11_ metric.
"""
import json
import re
import sys

import yaml


def metric_names_in_docs(path):
    # docs/metrics.md lists each metric as a table row starting with | `df11_name` |.
    names = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"\|\s*`(df11_[a-z0-9_]+)`", line)
        if m:
            names.add(m.group(1))
    return names


def documented(name, names):
    # Histograms expose _bucket/_sum/_count series of the documented name.
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return name in names or base in names


def balanced(expr):
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in re.sub(r'"[^"]*"', '""', expr):
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


def check(root):
    problems = []
    dash = json.load(open(f"{root}/deploy/grafana/df11-serve.json", encoding="utf-8"))
    sources = yaml.safe_load(open(f"{root}/deploy/grafana/provisioning/datasources/df11-prometheus.yml"))
    uids = {d["uid"] for d in sources["datasources"] if d.get("type") == "prometheus"}
    if len(uids) != 1:
        return [f"datasources: expected one prometheus datasource uid, found {sorted(uids)}"]
    uid = uids.pop()
    docs = metric_names_in_docs(f"{root}/docs/metrics.md")
    if not docs:
        problems.append("docs/metrics.md lists no metrics")

    def check_ds(where, ds):
        if not isinstance(ds, dict) or ds.get("uid") != uid or ds.get("type") != "prometheus":
            problems.append(f"{where}: datasource {ds!r} is not {{type: prometheus, uid: {uid}}}")

    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            check_ds(f"variable {var.get('name')}", var.get("datasource"))
    panels = dash.get("panels") or []
    if not panels:
        problems.append("dashboard has no panels")
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        problems.append(f"panel ids repeat: {ids}")
    for p in panels:
        where = f"panel {p.get('id')} '{p.get('title')}'"
        if not isinstance(p.get("gridPos"), dict):
            problems.append(f"{where}: no gridPos")
        check_ds(where, p.get("datasource"))
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs):
            problems.append(f"{where}: refIds repeat: {refs}")
        for t in targets:
            expr = t.get("expr", "")
            check_ds(f"{where} target {t.get('refId')}", t.get("datasource"))
            if not expr.strip():
                problems.append(f"{where} target {t.get('refId')}: empty expr")
            if not balanced(expr):
                problems.append(f"{where} target {t.get('refId')}: unbalanced brackets in {expr}")
            for name in re.findall(r"\bdf11_[a-z0-9_]+", expr):
                if not documented(name, docs):
                    problems.append(f"{where}: metric {name} is not in docs/metrics.md")
    rules = yaml.safe_load(open(f"{root}/deploy/prometheus/rules.yml", encoding="utf-8"))
    for group in rules["groups"]:
        for rule in group["rules"]:
            for name in re.findall(r"\bdf11_[a-z0-9_]+", rule["expr"]):
                if not documented(name, docs):
                    problems.append(f"rule {rule.get('alert')}: metric {name} is not in docs/metrics.md")
    return problems


def main():
    problems = check(sys.argv[1] if len(sys.argv) > 1 else ".")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("grafana dashboard, provisioning and alert rules: ok")


if __name__ == "__main__":
    main()
