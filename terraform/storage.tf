# Every bucket created here: uniform bucket-level access (IAM only, no ACLs),
# public access prevention enforced, no object versioning (Delta tables keep
# their own history; versioning would only retain vacuumed files and cost).

resource "google_storage_bucket" "datastream" {
  count = var.create_datastream_bucket ? 1 : 0

  project                     = var.project
  name                        = local.default_datastream_bucket_name
  location                    = local.datastream_bucket_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  versioning {
    enabled = false
  }

  # Optional expiry of Datastream's own output. dsdelta never deletes or
  # rewrites source objects; this is the operator's retention choice.
  dynamic "lifecycle_rule" {
    for_each = var.source_retention_days > 0 ? [var.source_retention_days] : []
    content {
      condition {
        age            = lifecycle_rule.value
        matches_prefix = local.datastream_object_prefix == "" ? [] : [local.datastream_object_prefix]
      }
      action {
        type = "Delete"
      }
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket" "lake" {
  count = var.create_lake_bucket ? 1 : 0

  project                     = var.project
  name                        = local.default_lake_bucket_name
  location                    = local.bucket_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  versioning {
    enabled = false
  }

  # Staged parquet files are merged within minutes and expired by compaction;
  # this rule only sweeps leftovers (e.g. files staged for a table that was
  # later excluded), so it must stay well above any expected merge outage.
  lifecycle_rule {
    condition {
      age            = var.staging_retention_days
      matches_prefix = [local.staging_object_prefix]
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis]
}

# Holds the function source archives only; the functions never read it (the
# Cloud Functions service agent does, to build them).
resource "google_storage_bucket" "function_source" {
  project                     = var.project
  name                        = "${var.project}-${local.prefix}-fn-source"
  location                    = local.bucket_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # only rebuildable archives live here
  labels                      = local.labels

  versioning {
    enabled = false
  }

  lifecycle_rule {
    condition {
      # Old archives are never read again once their build has run.
      age = 30
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis]
}

# The repository root (module github.com/dsdelta/dsdelta) is the function
# source: the root package registers OnFile, Merge and Compact.
data "archive_file" "function_source" {
  count = var.source_archive_path == null ? 1 : 0

  type        = "zip"
  source_dir  = "${path.module}/.."
  output_path = "${path.module}/.terraform/dsdelta-function-source.zip"

  # Only what `go build` of the root package needs goes to Cloud Build: the
  # bench module (its own go.mod), deployment files and local build output stay out.
  excludes = [
    ".git",
    ".ci",
    ".cache",
    ".github",
    "bench",
    "bin",
    "docs",
    "dsdelta",
    "terraform",
    "cloudbuild.yaml",
  ]
}

locals {
  source_archive_path = var.source_archive_path != null ? var.source_archive_path : data.archive_file.function_source[0].output_path
  source_archive_md5  = var.source_archive_path != null ? filemd5(var.source_archive_path) : data.archive_file.function_source[0].output_md5
}

resource "google_storage_bucket_object" "function_source" {
  # The content hash in the name makes a source change redeploy the functions.
  name   = "dsdelta-${local.source_archive_md5}.zip"
  bucket = google_storage_bucket.function_source.name
  source = local.source_archive_path
}
