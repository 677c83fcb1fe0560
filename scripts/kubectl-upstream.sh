#!/usr/bin/env bash
# Runs Kubernetes' own kubectl command tests (the `run_*_tests` functions of upstream
# test/cmd/*.sh, with the assertion helpers of hack/lib/test.sh) against `plinth up`.
#
#   scripts/kubectl-upstream.sh [CORPUS_DIR]
#
# CORPUS_DIR (or $PLINTH_KUBECTL_TESTS; default ../shared/corpus/kubernetes-kubectl-tests
# beside the checkout) holds the upstream files; they stay there: the run works on a
# temporary copy with substitutes/ overlaid. Without the folder the run is SKIPPED (exit 0).
#
# Environment:
#   PLINTH_BIN                 the plinth binary (default target/debug/plinth, built if missing)
#   PLINTH_KUBECTL_ONLY        extended regex: run only the functions it matches
#   PLINTH_KUBECTL_TIMEOUT     seconds per function (default 150)
#   PLINTH_KUBECTL_JOBS        functions run at once, each on a server of its own (default 2)
#   PLINTH_KUBECTL_KEEP        keep the temporary directory (logs of every function)
#
# Prints `ADJUSTED file:line: <reason>` for each upstream assertion the runner rewrites to
# what a real cluster does (the table `adjustments` below), then per function `PASS name`,
# `FAIL name: <where it stopped, the assertion and kubectl's output>` or `SKIPPED name:
# <reason>`, then `N passed, M failed, K skipped`.
# Exits non-zero when a function named in scripts/kubectl-upstream.expected does not pass.
set -euo pipefail

# ---------------------------------------------------------------------------------------
# Functions that are not run, with the reason. Only components Plinth does not claim to be
# (controllers of the controller-manager, a scheduler and nodes, a kubelet to exec/attach/
# port-forward into) and behaviour current kubectl and kube-apiserver no longer have.
# ---------------------------------------------------------------------------------------
skip_reason() {
  case "$1" in
    run_nodes_tests) echo "needs Node objects registered by a kubelet (kubectl cordon/drain, node status)" ;;
    run_retrieve_multiple_tests) echo "needs Node objects registered by a kubelet" ;;
    run_kubectl_all_namespace_tests) echo "needs Node objects registered by a kubelet" ;;
    run_rc_tests) echo "needs the controller-manager's ReplicationController controller (asserts status.replicas and scaled Pods)" ;;
    run_deprecated_api_tests) echo "asserts removed APIs (extensions/v1beta1, policy/v1beta1 PodSecurityPolicy: served by no current kube-apiserver)" ;;
    run_kubectl_apply_tests) echo "creates an apiextensions.k8s.io/v1beta1 CustomResourceDefinition (apply.sh:126; removed in Kubernetes 1.22)" ;;
    run_kubectl_server_side_apply_tests) echo "creates an apiextensions.k8s.io/v1beta1 CustomResourceDefinition (apply.sh:431; removed in Kubernetes 1.22)" ;;
    run_crd_tests) echo "creates apiextensions.k8s.io/v1beta1 CustomResourceDefinitions (removed in Kubernetes 1.22)" ;;
    run_non_native_resource_tests) echo "part of run_crd_tests: reads the company.com resources its v1beta1 CRDs define" ;;
    run_namespace_tests | run_clusterroles_tests) echo "asserts kubectl's old lower-case text 'warning: deleting cluster-scoped resources' (current kubectl prints 'Warning: ...')" ;;
    run_save_config_tests) echo "runs 'kubectl run --generator=run/v1' (the flag was removed from kubectl)" ;;
    run_wait_tests) echo "needs the controller-manager's Deployment controller (waits on the Pods of Deployment dtest)" ;;
    run_wait_with_non_existence_check_tests) echo "uses 'kubectl wait --wait-for-creation', which no released kubectl has (it shipped as --for=create)" ;;
    run_resource_aliasing_tests) echo "its fixture test/e2e/testing-manifests/statefulset/cassandra/controller.yaml is not in the corpus" ;;
    *) return 1 ;;
  esac
}

# Functions that assert the output of an older kubectl than the one on PATH, and the
# version they are run with (when the Cloud SDK's kubectl.<version> is beside kubectl).
kubectl_version_for() {
  case "$1" in
    # `kubectl -v=6` request lines: `GET <url> 200 OK` up to 1.32, structured since 1.33.
    run_kubectl_get_tests) echo 1.32 ;;
    *) return 1 ;;
  esac
}

script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
repo="$(cd "$(dirname "$script")/.." && pwd)"

# ---------------------------------------------------------------------------------------
# One function, in a shell of its own (called by the runner below as `--one NAME`): the
# environment upstream's hack/make-rules/test-cmd.sh sets up, then the function.
# ---------------------------------------------------------------------------------------
if [[ "${1:-}" == "--one" ]]; then
  fn="$2"
  cd "$KUBE_ROOT"
  export LANG=C HOME="$KUBE_TEMP"
  # test.sh colours its messages with tput; the logs are files, not terminals.
  tput() { :; }
  # shellcheck disable=SC1091
  source hack/lib/test.sh
  for f in test/cmd/*.sh; do
    # shellcheck disable=SC1090
    source "$f"
  done

  # The test files come from several upstream commits: the older ones quote the object and
  # template for helpers that evaluated them as shell words (`"pods -l'name in (x)'"`,
  # `eq .x \\\"y\\\"`), the newer ones for the copy's hack/lib/test.sh, which passes them
  # verbatim. A backslash-quote or a quoted object marks the older form; those calls are
  # evaluated as their own helpers did, the others go to test.sh's helpers unchanged.
  eval "kube::test::verbatim_$(declare -f kube::test::object_assert | sed 's/^kube::test:://')"
  eval "kube::test::verbatim_$(declare -f kube::test::get_object_jsonpath_assert | sed 's/^kube::test:://')"
  shell_quoted() { [[ "$1" == *'\"'* || "$2" == *[\'\"]* ]]; }
  kube::test::object_assert() {
    local tries=$1 object=$2 request=$3 expected=$4 args=${5:-} j
    if ! shell_quoted "$request" "$object$args"; then
      kube::test::verbatim_object_assert "$@"
      return
    fi
    for j in $(seq 1 "$tries"); do
      res=$(eval kubectl get '"${kube_flags[@]}"' "$args" "$object" -o go-template=\""$request"\")
      if [[ "$res" =~ ^$expected$ ]]; then
        echo "$(kube::test::get_caller 3): Successful get $object $request: $res"
        return 0
      fi
      echo "Waiting for Get $object $request $args: expected: $expected, got: $res"
      sleep $((j - 1))
    done
    echo "$(kube::test::get_caller 3): FAIL!"
    echo "Get $object $request"
    echo "  Expected: $expected"
    echo "  Got:      $res"
    return 1
  }
  kube::test::get_object_jsonpath_assert() {
    local object=$1 request=$2 expected=$3
    if ! shell_quoted "$request" "$object"; then
      kube::test::verbatim_get_object_jsonpath_assert "$@"
      return
    fi
    res=$(eval kubectl get '"${kube_flags[@]}"' "$object" -o jsonpath=\""$request"\")
    if [[ "$res" =~ ^$expected$ ]]; then
      echo "$(kube::test::get_caller): Successful get $object $request: $res"
      return 0
    fi
    echo "$(kube::test::get_caller): FAIL!"
    echo "Get $object $request"
    echo "  Expected: $expected"
    echo "  Got:      $res"
    return 1
  }

  kube::log::status() { echo "+++ [$(date +%H:%M:%S)] $*"; }
  kube::log::info() { echo "$*"; }
  kube::log::error() { echo "!!! [$(date +%H:%M:%S)] $*" >&2; }
  kube::log::error_exit() { kube::log::error "$1"; exit "${2:-1}"; }
  create_and_use_new_namespace() {
    local ns="namespace-$(date +%s)-${RANDOM}"
    kube::log::status "Creating namespace ${ns}"
    kubectl create namespace "$ns"
    kubectl config set-context "$CONTEXT" --namespace="$ns"
  }

  # The variables upstream's runner defines for the test files.
  SUPPORTED_RESOURCES=("*")
  CONTEXT=test
  SED=sed
  IMAGE_NGINX="registry.k8s.io/nginx:1.7.9"
  IMAGE_DEPLOYMENT_R1="registry.k8s.io/nginx:test-cmd"
  IMAGE_DEPLOYMENT_R2="$IMAGE_NGINX"
  IMAGE_PERL="registry.k8s.io/perl"
  IMAGE_PAUSE_V2="registry.k8s.io/pause:2.0"
  export IMAGE_NGINX IMAGE_DEPLOYMENT_R1 IMAGE_DEPLOYMENT_R2 IMAGE_PERL IMAGE_PAUSE_V2
  clusterroles=clusterroles configmaps=configmaps csr=csr deployments=deployments
  namespaces=namespaces nodes=nodes persistentvolumeclaims=persistentvolumeclaims
  persistentvolumes=persistentvolumes pods=pods podtemplates=podtemplates
  replicasets=replicasets replicationcontrollers=replicationcontrollers roles=roles
  secrets=secrets serviceaccounts=serviceaccounts services=services
  statefulsets=statefulsets storageclass=storageclass
  subjectaccessreviews=subjectaccessreviews
  customresourcedefinitions=customresourcedefinitions daemonsets=daemonsets
  controllerrevisions=controllerrevisions job=jobs
  kube_flags=(-s "https://127.0.0.1:${SECURE_API_PORT}")
  kube_flags_without_token=("${kube_flags[@]}")
  kube_flags_with_token=("${kube_flags[@]}" --token=admin-token)
  export id_field=".metadata.name" labels_field=".metadata.labels"
  export annotations_field=".metadata.annotations" service_selector_field=".spec.selector"
  export rc_replicas_field=".spec.replicas" rc_status_replicas_field=".status.replicas"
  export rc_container_image_field=".spec.template.spec.containers"
  export rs_replicas_field=".spec.replicas" port_field="(index .spec.ports 0).port"
  export port_name="(index .spec.ports 0).name" second_port_field="(index .spec.ports 1).port"
  export second_port_name="(index .spec.ports 1).name"
  export image_field="(index .spec.containers 0).image"
  export pod_container_name_field="(index .spec.containers 0).name"
  export container_name_field="(index .spec.template.spec.containers 0).name"
  export hpa_min_field=".spec.minReplicas" hpa_max_field=".spec.maxReplicas"
  export hpa_cpu_field="(index .spec.metrics 0).resource.target.averageUtilization"
  export template_labels=".spec.template.metadata.labels.name"
  export statefulset_replicas_field=".spec.replicas"
  export statefulset_observed_generation=".status.observedGeneration"
  export job_parallelism_field=".spec.parallelism" deployment_replicas=".spec.replicas"
  export secret_data=".data" secret_type=".type"
  export change_cause_annotation='.*kubernetes.io/change-cause.*'
  export pdb_min_available=".spec.minAvailable" pdb_max_unavailable=".spec.maxUnavailable"
  export generation_field=".metadata.generation"
  export container_len="(len .spec.template.spec.containers)"
  export image_field0="(index .spec.template.spec.containers 0).image"
  export image_field1="(index .spec.template.spec.containers 1).image"

  # Where it stopped: the runner reports the last of these lines.
  trap 'echo "@@ERR ${BASH_SOURCE[0]##*/}:${LINENO}: ${BASH_COMMAND}"' ERR
  set -o errexit -o nounset -o pipefail -o errtrace
  create_and_use_new_namespace
  "$fn"
  exit 0
fi

# ---------------------------------------------------------------------------------------
# The runner.
# ---------------------------------------------------------------------------------------
corpus="${1:-${PLINTH_KUBECTL_TESTS:-$repo/../shared/corpus/kubernetes-kubectl-tests}}"
if [[ ! -d "$corpus/test/cmd" || ! -f "$corpus/hack/lib/test.sh" ]]; then
  echo "SKIPPED: no kubectl test corpus at $corpus (set PLINTH_KUBECTL_TESTS or pass its path)"
  exit 0
fi
corpus="$(cd "$corpus" && pwd)"
for tool in kubectl openssl timeout curl; do
  command -v "$tool" >/dev/null || { echo "kubectl-upstream: $tool is not on PATH" >&2; exit 2; }
done

bin="${PLINTH_BIN:-$repo/target/debug/plinth}"
if [[ -z "${PLINTH_BIN:-}" && ! -x "$bin" ]]; then
  (cd "$repo" && cargo build -q -p plinth --bin plinth)
fi
[[ -x "$bin" ]] || { echo "kubectl-upstream: no plinth binary at $bin" >&2; exit 2; }

per_fn_timeout="${PLINTH_KUBECTL_TIMEOUT:-150}"
jobs="${PLINTH_KUBECTL_JOBS:-2}"
expected_file="$repo/scripts/kubectl-upstream.expected"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/plinth-kubectl-upstream.XXXXXX")"
server_pids=()
cleanup() {
  for pid in "${server_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${server_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [[ -n "${PLINTH_KUBECTL_KEEP:-}" ]]; then
    echo "kubectl-upstream: logs kept in $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

# The working tree: the upstream files, substitutes/ over them, and a TLS pair for
# `kubectl create secret tls` (the key is not in the copy; the certificate must match it).
root="$tmp/root"
mkdir -p "$root"
cp -R "$corpus/." "$root/"
if [[ -d "$corpus/substitutes" ]]; then
  cp -R "$corpus/substitutes/." "$root/"
fi
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kubectl-upstream" \
  -keyout "$root/hack/testdata/tls.key" -out "$root/hack/testdata/tls.crt" 2>/dev/null

# ---------------------------------------------------------------------------------------
# Assertions of the copy that no kube-apiserver + kubectl satisfies, adjusted in the
# temporary copy to what a real cluster does; one entry per assertion, each printed as
# `ADJUSTED file:line: reason`. An entry applies only when the line holds exactly the
# upstream text below (otherwise the run prints `NOT ADJUSTED` and the line stays as it is).
# Never an entry for something Plinth merely fails.
#   file | line | upstream text | replacement | reason
# ---------------------------------------------------------------------------------------
adjustments() {
  cat <<'ADJ'
test/cmd/get.sh|180|  kube::test::if_has_string "${output_message}" 'valid-pod:'|  kube::test::if_has_string "${output_message}" 'valid-pod'|asserts 'valid-pod:' for `kubectl get pod valid-pod --subresource=status`; kube-apiserver answers with the Pod's Table (StatusREST.ConvertToTable is the Pod store's), so kubectl prints `NAME READY STATUS ...` / `valid-pod ...`, never `valid-pod:`; asserted as 'valid-pod'
test/cmd/get.sh|183|  output_message=$(kubectl get "${kube_flags[@]}" pod valid-pod --subresource=scale)|  output_message=$(! kubectl get "${kube_flags[@]}" pod valid-pod --subresource=scale 2>&1)|runs `kubectl get pod valid-pod --subresource=scale` without `!` or `2>&1`: kubectl exits 1 with the 404 on stderr (Pods have no scale), so errexit stops the function before line 184; run as `$(! kubectl ... 2>&1)` and line 184 asserts the 'the server could not find the requested resource' it prints
ADJ
}
adjust_copy() {
  local file line text replacement reason current
  while IFS='|' read -r file line text replacement reason; do
    [[ -z "$file" ]] && continue
    if [[ ! -f "$root/$file" ]]; then
      echo "NOT ADJUSTED ${file##*/}:$line: $file is not in the copy"
      continue
    fi
    current="$(sed -n "${line}p" "$root/$file")"
    if [[ "$current" != "$text" ]]; then
      echo "NOT ADJUSTED ${file##*/}:$line: the copy's line differs from the upstream text the adjustment is for (has: $current)"
      continue
    fi
    local -a lines
    mapfile -t lines <"$root/$file"
    lines[line - 1]="$replacement"
    printf '%s\n' "${lines[@]}" >"$root/$file"
    echo "ADJUSTED ${file##*/}:$line: $reason"
  done < <(adjustments)
}
adjust_copy

# One server per lane: functions of different lanes never see each other's cluster-scoped
# objects. The admin token is the one upstream's fixtures send (`admin-token`). Upstream
# runs the tests on an API server and controller-manager with no kubelet, so Pods stay
# Pending there: `--no-runner` gives the same (no image pulls, no status writes). Its
# kube-apiserver runs with `--authorization-mode=RBAC,AlwaysAllow` (hack/make-rules/
# test-cmd.sh), so a SubjectAccessReview for any user is allowed and impersonated users
# may create what they ask for: `--authorization-mode RBAC,AlwaysAllow` gives the same.
start_server() {
  local lane="$1" data="$tmp/server-$1"
  mkdir -p "$data/auth"
  printf 'admin-token\n' > "$data/auth/admin.token"
  "$bin" up --data-dir "$data" --listen 127.0.0.1:0 --no-runner --authorization-mode RBAC,AlwaysAllow --log warn >"$tmp/server-$lane.log" 2>&1 &
  echo "$!" >"$tmp/server-$lane.pid"
  local i
  for i in $(seq 1 240); do
    if [[ -s "$data/kubeconfig" ]] && KUBECONFIG="$data/kubeconfig" kubectl get --raw /readyz >/dev/null 2>&1; then
      break
    fi
    sleep 0.5
  done
  if ! KUBECONFIG="$data/kubeconfig" kubectl get --raw /readyz >/dev/null 2>&1; then
    echo "kubectl-upstream: plinth up (lane $lane) did not become ready; its log:" >&2
    tail -n 30 "$tmp/server-$lane.log" >&2
    exit 2
  fi
  # What upstream's runner ensures before the functions: namespace default and
  # service/kubernetes (created if the server has none).
  KUBECONFIG="$data/kubeconfig" kubectl get namespace default >/dev/null
  KUBECONFIG="$data/kubeconfig" kubectl create -f "$root/hack/testdata/kubernetes-service.yaml" >/dev/null 2>&1 || true
  KUBECONFIG="$data/kubeconfig" kubectl get -f "$root/hack/testdata/kubernetes-service.yaml" >/dev/null
}

# Every run_*_tests function the corpus defines, in file order.
mapfile -t functions < <(cd "$root" && grep -hoE '^(function[[:space:]]+)?run_[A-Za-z0-9_]+[[:space:]]*\(\)' test/cmd/*.sh \
  | sed -E 's/^function[[:space:]]+//; s/[[:space:]]*\(\)$//')
if [[ -n "${PLINTH_KUBECTL_ONLY:-}" ]]; then
  mapfile -t functions < <(printf '%s\n' "${functions[@]}" | grep -E "$PLINTH_KUBECTL_ONLY" || true)
fi

# The servers start side by side; their pids are read back for the cleanup.
starters=()
for lane in $(seq 1 "$jobs"); do
  start_server "$lane" &
  starters+=("$!")
done
start_status=0
for pid in "${starters[@]}"; do
  wait "$pid" || start_status=$?
done
for lane in $(seq 1 "$jobs"); do
  [[ -s "$tmp/server-$lane.pid" ]] && server_pids+=("$(cat "$tmp/server-$lane.pid")")
done
[[ $start_status -eq 0 ]] || exit 2

# Runs one function against lane $2's server; writes its log and its verdict line.
run_one() {
  local fn="$1" lane="$2" data="$tmp/server-$2" work="$tmp/work/$1"
  mkdir -p "$work"
  cp "$data/kubeconfig" "$work/kubeconfig"
  KUBECONFIG="$work/kubeconfig" kubectl config rename-context plinth test >/dev/null
  local port
  port="$(sed -nE 's#.*server: https://127\.0\.0\.1:([0-9]+).*#\1#p' "$work/kubeconfig" | head -n1)"
  local rc=0 path="$PATH" version real
  if version="$(kubectl_version_for "$fn")"; then
    real="$(dirname "$(readlink -f "$(command -v kubectl)")")/kubectl.$version"
    if [[ -x "$real" ]]; then
      mkdir -p "$work/bin"
      ln -sf "$real" "$work/bin/kubectl"
      path="$work/bin:$PATH"
    fi
  fi
  (cd "$root" && PATH="$path" KUBE_ROOT="$root" KUBE_TEMP="$work" KUBECONFIG="$work/kubeconfig" \
    SECURE_API_PORT="$port" API_HOST=127.0.0.1 \
    timeout -k 10 "$per_fn_timeout" bash "$script" --one "$fn") >"$work/log" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "PASS $fn" >"$work/verdict"
    return
  fi
  {
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      printf 'FAIL %s: timed out after %ss; last output:\n' "$fn" "$per_fn_timeout"
      grep -v '^@@ERR' "$work/log" | tail -n 6 | sed 's/^/    /'
    else
      local where
      where="$(grep '^@@ERR' "$work/log" | tail -n 1 | sed 's/^@@ERR //')"
      printf 'FAIL %s: %s\n' "$fn" "${where:-exit status $rc}"
      if grep -q 'FAIL' "$work/log"; then
        # The assertion (what was expected) first, then the start of kubectl's output.
        local failed
        failed="$(grep -v '^@@ERR' "$work/log" | sed -n '/FAIL/,$p' | grep -v '^[[:space:]]*$')"
        grep -E '^(has not:|has:|Get |Describe |  Expected|  Got:|  Events information)' <<<"$failed" | head -n 4 | sed 's/^/    /'
        grep -vE '^(has not:|has:|Get |Describe |  Expected|  Got:|  Events information|.*FAIL!?$|[0-9]+ test/cmd/)' <<<"$failed" | head -n 4 | sed 's/^/    /'
      else
        grep -v '^@@ERR' "$work/log" | grep -v '^[[:space:]]*$' | tail -n 6 | sed 's/^/    /'
      fi
    fi
  } | cut -c1-400 >"$work/verdict"
}

mkdir -p "$tmp/work"
skipped=0
queue=()
for fn in "${functions[@]}"; do
  if reason="$(skip_reason "$fn")"; then
    mkdir -p "$tmp/work/$fn"
    echo "SKIPPED $fn: $reason" >"$tmp/work/$fn/verdict"
  else
    queue+=("$fn")
  fi
done

# Lane k takes every k-th function of the queue, one after another.
for lane in $(seq 1 "$jobs"); do
  (
    # A lane reports every function it was given, whatever one of them does.
    set +e +o pipefail
    i=0
    for fn in "${queue[@]}"; do
      if (( i % jobs == lane - 1 )); then
        run_one "$fn" "$lane"
      fi
      i=$((i + 1))
    done
  ) &
done
wait

passed=0 failed=0 skipped=0
declare -A verdict=()
for fn in "${functions[@]}"; do
  mkdir -p "$tmp/work/$fn"
  if [[ ! -s "$tmp/work/$fn/verdict" ]]; then
    echo "FAIL $fn: the runner recorded no result (see $tmp/work/$fn/log with PLINTH_KUBECTL_KEEP=1)" >"$tmp/work/$fn/verdict"
  fi
  cat "$tmp/work/$fn/verdict"
  line="$(head -n1 "$tmp/work/$fn/verdict")"
  case "$line" in
    PASS*) passed=$((passed + 1)); verdict[$fn]=pass ;;
    SKIPPED*) skipped=$((skipped + 1)); verdict[$fn]=skip ;;
    *) failed=$((failed + 1)); verdict[$fn]=fail ;;
  esac
done
echo "$passed passed, $failed failed, $skipped skipped"

# The baseline: every function listed there must pass (when it was selected).
status=0
if [[ -f "$expected_file" ]]; then
  while read -r fn _; do
    [[ -z "$fn" || "$fn" == \#* ]] && continue
    [[ -z "${verdict[$fn]+x}" ]] && continue
    if [[ "${verdict[$fn]}" != pass ]]; then
      echo "kubectl-upstream: $fn is in scripts/kubectl-upstream.expected but did not pass" >&2
      status=1
    fi
  done <"$expected_file"
fi
exit $status
