#!/usr/bin/env bash
# Terraform checks for terraform/ (called by `make terraform-check`, hence by .ci/run).
#
# Always: `terraform fmt -check -recursive terraform` (fails on any diff).
# Then, only when the google and archive providers can be installed without
# the network (a filesystem mirror or a plugin directory holding them, see
# provider_dirs below): `terraform init -backend=false`, `terraform validate`
# and `terraform test` (plan-level tests against a mocked google provider).
# Without them it says so plainly and succeeds: the checks that need the
# provider schema run in Cloud Build (cloudbuild.yaml), where providers are
# installed normally. Nothing is ever downloaded by this script.
#
# DSDELTA_TF_ONLINE=1 lets `terraform init` install providers the usual way
# (for machines that can reach the provider registry).
set -euo pipefail
cd "$(dirname "$0")/.."

tfdir=terraform

if ! command -v terraform >/dev/null 2>&1; then
  echo "terraform-check: terraform is not installed (need terraform >= 1.5 on PATH)" >&2
  exit 1
fi
echo "terraform-check: $(terraform version | head -1)"

ran=()

echo "terraform-check: terraform fmt -check -recursive $tfdir"
if ! terraform fmt -check -recursive -diff "$tfdir"; then
  echo "terraform-check: FAIL: files above need \`terraform fmt -recursive $tfdir\`" >&2
  exit 1
fi
ran+=("fmt")

# Directories where Terraform finds providers without the network: the
# implied local mirrors, explicit filesystem_mirror paths of the CLI
# configuration, the plugin cache, and an already-initialised working dir.
provider_dirs() {
  local xdg_data_home=${XDG_DATA_HOME:-$HOME/.local/share}
  local xdg_data_dirs=${XDG_DATA_DIRS:-/usr/local/share:/usr/share}
  echo "$HOME/.terraform.d/plugins"
  echo "$xdg_data_home/terraform/plugins"
  local d
  IFS=: read -r -a dirs <<<"$xdg_data_dirs"
  for d in "${dirs[@]}"; do echo "$d/terraform/plugins"; done
  [ -n "${TF_PLUGIN_CACHE_DIR:-}" ] && echo "$TF_PLUGIN_CACHE_DIR"
  local cfg=${TF_CLI_CONFIG_FILE:-${TF_CLI_CONFIG_PATH:-$HOME/.terraformrc}}
  if [ -f "$cfg" ]; then
    # plugin_cache_dir = "..." and `path = "..."` inside filesystem_mirror blocks.
    sed -n -E 's/^[[:space:]]*(plugin_cache_dir|path)[[:space:]]*=[[:space:]]*"([^"]+)".*/\2/p' "$cfg"
  fi
  echo "$tfdir/.terraform/providers"
}

# has_provider NAME: true when some provider directory holds hashicorp/NAME
# (unpacked VERSION/OS_ARCH directories or packed zips, both layouts).
has_provider() {
  local name=$1 d
  while IFS= read -r d; do
    d=${d/#\~/$HOME}
    if [ -d "$d/registry.terraform.io/hashicorp/$name" ] &&
      [ -n "$(ls -A "$d/registry.terraform.io/hashicorp/$name" 2>/dev/null)" ]; then
      echo "terraform-check: found hashicorp/$name under $d"
      return 0
    fi
  done < <(provider_dirs)
  return 1
}

online=${DSDELTA_TF_ONLINE:-0}
if [ "$online" != "1" ]; then
  missing=()
  has_provider google || missing+=("google")
  has_provider archive || missing+=("archive")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "terraform-check: ran: ${ran[*]}"
    what=${missing[0]}
    [ ${#missing[@]} -gt 1 ] && what="${missing[0]} or ${missing[1]}"
    echo "terraform-check: terraform validate/test skipped: no $what provider installed on this machine"
    echo "terraform-check: (they run in Cloud Build; set DSDELTA_TF_ONLINE=1 where the provider registry is reachable)"
    exit 0
  fi
fi

echo "terraform-check: terraform init -backend=false"
if ! terraform -chdir="$tfdir" init -backend=false -input=false -no-color >/tmp/dsdelta-tf-init.log 2>&1; then
  cat /tmp/dsdelta-tf-init.log >&2
  echo "terraform-check: FAIL: terraform init could not install the providers it found (see above)" >&2
  exit 1
fi
ran+=("init")

echo "terraform-check: terraform validate"
terraform -chdir="$tfdir" validate -no-color
ran+=("validate")

echo "terraform-check: terraform test"
terraform -chdir="$tfdir" test -no-color
ran+=("test")

echo "terraform-check: ran: ${ran[*]}"
