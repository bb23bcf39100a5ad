#!/usr/bin/env bash
# Looks at the HTML reports the way a person does: renders a run page and a matrix of twelve
# columns (four driver versions × three Kubernetes versions, some guarantees failing) from
# the test fixture, and screenshots both in headless Chromium at laptop width (1366 px).
# Needs Debian's chromium (apt-get install chromium). Usage: report/scripts/screenshot.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${1:-target/screenshots}")
chromium=${CHROMIUM:-chromium}
# XTASK=target/debug/xtask uses a built binary instead of `cargo xtask`.
read -r -a xtask <<< "${XTASK:-cargo xtask}"
command -v "$chromium" >/dev/null || { echo "screenshot: $chromium is not on PATH; apt-get install chromium" >&2; exit 3; }
rm -rf "$out" && mkdir -p "$out/results"
fixture=report/tests/fixtures/mock-run.json

python3 - "$fixture" "$out/results" <<'PY'
import copy, json, sys
base = json.load(open(sys.argv[1]))
for i, driver in enumerate(["0.1.0", "0.2.0", "0.3.0", "0.4.0"]):
    for j, k8s in enumerate(["v1.35.4", "v1.36.3", "v1.37.2"]):
        r = copy.deepcopy(base)
        r["driver"]["version"] = driver
        r["cluster"]["kubernetes_version"] = k8s
        r["started_at"] = f"2026-12-0{i + 1}T1{j}:00:00Z"
        # A regression in the newest driver, and a skip on the oldest Kubernetes.
        for p in r["profiles"]:
            for g in p["guarantees"]:
                if driver == "0.4.0" and g["id"] == "claim.compatible.allocated":
                    g["verdict"], g["reason"] = "fail", "not allocated within 30s"
                if k8s == "v1.35.4" and g["id"] == "claim.impossible.capacity":
                    g["verdict"], g["reason"] = "skip", "the driver publishes no capacity to ask too much of"
        json.dump(r, open(f"{sys.argv[2]}/mock-{driver}-{k8s}.json", "w"), indent=1)
PY

"${xtask[@]}" report "$fixture" --format html --out "$out/run.html"
"${xtask[@]}" matrix "$out/results" --out "$out"

shot() {
  "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d)" --hide-scrollbars --window-size=1366,"$3" \
    --screenshot="$out/$2" "file://$out/$1" 2>/dev/null
  echo "screenshot: $out/$2"
}
shot run.html run.png 1400
shot matrix.html matrix.png 1600
