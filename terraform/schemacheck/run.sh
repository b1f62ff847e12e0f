#!/usr/bin/env bash
# Checks the Terraform configuration in terraform/ against the real google
# provider schema without the provider: rebuilds the schema from the CDK for
# Terraform prebuilt bindings (extract.js), serves it from a stand-in provider
# (main.go), then runs terraform validate, terraform plan (several variable
# sets, each plan's dashboard checked by dashboardcheck/) and terraform test
# on a copy of the configuration. See README.md.
#
# Usage: terraform/schemacheck/run.sh [--no-test]
# Environment:
#   SCHEMACHECK_NPM_DIR  where the binding packages are installed
#                        (default /tmp/schemacheck-npm; installed when absent)
#   SCHEMACHECK_KEEP=1   keep the scratch directory for inspection
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tfdir="$(cd "$here/.." && pwd)"

# Versions: the last prebuilt bindings of hashicorp/google 6.x (6.50.0) and
# of hashicorp/archive (2.7.1). versions.tf must allow these provider versions.
google_pkg="@cdktf/provider-google@16.12.1"
google_version="6.50.0"
archive_pkg="@cdktf/provider-archive@11.0.1"
archive_version="2.7.1"

run_tests=1
if [[ "${1:-}" == "--no-test" ]]; then run_tests=0; fi

npm_dir="${SCHEMACHECK_NPM_DIR:-/tmp/schemacheck-npm}"
if [[ ! -f "$npm_dir/node_modules/@cdktf/provider-google/package.json" || ! -f "$npm_dir/node_modules/@cdktf/provider-archive/package.json" ]]; then
  echo "schemacheck: installing $google_pkg and $archive_pkg into $npm_dir" >&2
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && { [[ -f package.json ]] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --legacy-peer-deps --ignore-scripts "$google_pkg" "$archive_pkg" >&2)
fi

work="$(mktemp -d /tmp/schemacheck.XXXXXX)"
if [[ "${SCHEMACHECK_KEEP:-0}" == "1" ]]; then
  echo "schemacheck: scratch directory $work" >&2
else
  trap 'rm -rf "$work"' EXIT
fi

# A copy of the configuration, so that init leaves no lock file or
# .terraform directory in the repository.
mkdir -p "$work/repo"
(cd "$tfdir" && tar --exclude=./.terraform --exclude=./schemacheck --exclude='*.tfstate*' --exclude=.terraform.lock.hcl -cf - .) |
  (mkdir -p "$work/repo/terraform" && cd "$work/repo/terraform" && tar -xf -)

# Every google resource and data source type the configuration declares.
mapfile -t types < <(grep -rhoE '^(resource|data) "google_[a-z0-9_]+"' --include='*.tf' "$tfdir" --exclude-dir=schemacheck --exclude-dir=.terraform |
  sed -E 's/^resource "([^"]+)"/\1/; s/^data "([^"]+)"/data.\1/' | sort -u)

mkdir -p "$work/schemas"
node "$here/extract.js" "$npm_dir/node_modules/@cdktf/provider-google" registry.terraform.io/hashicorp/google "$work/schemas/google.json" "${types[@]}"
node "$here/extract.js" "$npm_dir/node_modules/@cdktf/provider-archive" registry.terraform.io/hashicorp/archive "$work/schemas/archive.json" data.archive_file

plugins="$work/plugins"
google_bin="$plugins/registry.terraform.io/hashicorp/google/$google_version/linux_amd64/terraform-provider-google_v$google_version"
archive_bin="$plugins/registry.terraform.io/hashicorp/archive/$archive_version/linux_amd64/terraform-provider-archive_v$archive_version"
mkdir -p "$(dirname "$google_bin")" "$(dirname "$archive_bin")"
(cd "$here" && go test -count=1 . >&2 && go build -o "$google_bin" .)
cp "$google_bin" "$archive_bin"

# The dashboard check: a module of its own (it needs the Monitoring API's
# message types), run on every plan below.
dashboardcheck="$work/dashboardcheck"
(cd "$here/dashboardcheck" && go test -count=1 . >&2 && go build -o "$dashboardcheck" .)

export SCHEMACHECK_SCHEMA_DIR="$work/schemas"
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
export TF_CLI_CONFIG_FILE="$work/terraformrc"
: >"$TF_CLI_CONFIG_FILE"
unset TF_PLUGIN_CACHE_DIR

cd "$work/repo/terraform"
status=0
step() {
  echo "== $*"
  if ! "$@"; then
    echo "FAILED: $*"
    status=1
  fi
}

step terraform fmt -check -recursive -diff "$tfdir"
terraform init -backend=false -input=false -plugin-dir="$plugins" >"$work/init.log" 2>&1 || { cat "$work/init.log"; exit 1; }

# Self-test first: a file with one error of each kind the check is for must
# fail validation with each of them, or a pass below would prove nothing.
selftest() {
  cat >schemacheck_selftest.tf <<'EOF'
resource "google_pubsub_subscription" "schemacheck_selftest" {
  name                   = "selftest"
  no_such_argument       = true
  effective_labels       = {}
  ack_deadline_seconds   = "ten"
  dead_letter_policy     = { dead_letter_topic = "t" }
}
resource "google_storage_notification" "schemacheck_selftest" {
  bucket         = "b"
  payload_format = "JSON_API_V1"
}
output "schemacheck_selftest" {
  value = google_pubsub_topic.wake.no_such_attribute
}
EOF
  local out
  out="$(terraform validate -no-color 2>&1 || true)"
  rm -f schemacheck_selftest.tf
  local want missing=0
  for want in 'Unsupported argument' 'Missing required argument' 'Incorrect attribute value type' 'Unsupported attribute'; do
    if ! grep -q "$want" <<<"$out"; then
      echo "schemacheck: self-test: validate did not report \"$want\""
      missing=1
    fi
  done
  # Computed-only values are reported once the file decodes cleanly.
  cat >schemacheck_selftest.tf <<'EOF'
resource "google_pubsub_topic" "schemacheck_selftest" {
  name             = "selftest"
  effective_labels = {}
}
EOF
  out="$(terraform validate -no-color 2>&1 || true)"
  rm -f schemacheck_selftest.tf
  if ! grep -q 'Value for a computed-only attribute' <<<"$out"; then
    echo "schemacheck: self-test: validate did not report a value for a computed-only attribute"
    missing=1
  fi
  return "$missing"
}
step selftest
step terraform validate -no-color

# plan NAME ARGS...: terraform plan with ARGS, then the dashboard check on
# the saved plan (dashboardcheck/: the dashboard JSON against the
# Monitoring API's messages and the plan's log-based metrics).
plan() {
  local name="$1"
  shift
  echo "== terraform plan ($name)"
  if terraform plan -input=false -refresh=false -lock=false -no-color -var project=schemacheck-project -out="$work/plan-$name.tfplan" "$@" >"$work/plan-$name.log" 2>&1; then
    grep -E '^Plan:' "$work/plan-$name.log" || true
  else
    cat "$work/plan-$name.log"
    echo "FAILED: terraform plan ($name)"
    status=1
    return
  fi
  if ! { terraform show -json "$work/plan-$name.tfplan" >"$work/plan-$name.json" && "$dashboardcheck" "$work/plan-$name.json"; }; then
    echo "FAILED: dashboard check ($name)"
    status=1
  fi
}
plan default
plan apis-off -var enable_apis=false
plan eventarc -var trigger_mode=eventarc -var enable_apis=false
plan reconcile-settings -var reconcile_since=2026-01-01T00:00:00Z -var reconcile_grace=5m -var reconcile_lookback=3h -var 'reconcile_schedule=*/5 * * * *' -var enable_alerts=false
plan name-prefix -var name_prefix=dsdelta-prod
plan existing-buckets -var create_datastream_bucket=false -var create_lake_bucket=false -var create_firestore_database=false -var datastream_bucket_location=US -var trigger_mode=eventarc
for source in mysql postgresql oracle sqlserver; do
  plan "datastream-$source" -var create_datastream_stream=true -var datastream_source_password=x \
    -var "datastream={source_type=\"$source\",hostname=\"db.internal\",username=\"ds\",database=\"shop\",publication=\"pub\",replication_slot=\"slot\",include=[\"shop\"],file_format=\"json\",private_connection=\"projects/p/locations/r/privateConnections/c\"}"
done

if [[ "$run_tests" == "1" ]]; then
  step terraform test -no-color
fi

if [[ "$status" == "0" ]]; then
  echo "schemacheck: OK (google $google_version schema from $google_pkg)"
else
  echo "schemacheck: FAILED"
fi
exit "$status"
