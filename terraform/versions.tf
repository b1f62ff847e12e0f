terraform {
  # 1.5 for check blocks and import blocks; optional() object attributes need 1.3.
  required_version = ">= 1.5"

  required_providers {
    # 6.x and 7.x: validate and plan pass on 6.50.0 (schemacheck/) and on
    # 7.45.0 (built from source, issue 15). 8.0 may remove or change
    # arguments again: widen only after checking against its schema and its
    # upgrade guide. modules/datastream repeats this constraint.
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
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
