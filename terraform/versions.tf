terraform {
  # 1.5 for check blocks and import blocks; optional() object attributes need 1.3.
  required_version = ">= 1.5"

  required_providers {
    # 6.x only: the configuration is checked against the 6.50.0 schema
    # (schemacheck/); widen to 7.x only after checking it against that schema
    # (7.0 removed and changed arguments, see the provider's upgrade guide).
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 7.0"
    }
    # Zips the repository root into the function source archive.
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4"
    }
  }

  # No backend block here on purpose: `terraform test` and local plans use the
  # local state, and Cloud Build writes terraform/backend_gcs.tf (git-ignored)
  # before `terraform init -backend-config=bucket=...`. See docs/deploy.md.
}

provider "google" {
  project = var.project
  region  = var.region
}
