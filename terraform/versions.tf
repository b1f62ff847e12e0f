terraform {
  # 1.5 for check blocks and import blocks; optional() object attributes need 1.3.
  required_version = ">= 1.5"

  required_providers {
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
