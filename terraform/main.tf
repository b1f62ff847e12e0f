# dsdelta deployment: Datastream output on GCS → onfile (stage) → merge (Delta
# commit) → compact (scheduled maintenance). Resources are split by concern:
# apis.tf, storage.tf, pubsub.tf, firestore.tf, iam.tf, functions.tf,
# scheduler.tf, monitoring.tf, dashboard.tf, datastream.tf; outputs.tf lists
# what to hand on.

locals {
  prefix = var.name_prefix

  datastream_bucket_location = coalesce(var.datastream_bucket_location, var.region)
  bucket_location            = coalesce(var.bucket_location, var.region)
  firestore_location         = coalesce(var.firestore_location, var.region)

  # Bucket names default to <project>-<prefix>-datastream / -lake, whether this
  # configuration creates the bucket or uses an existing one. Created buckets
  # are referenced through their resources so that everything using a bucket
  # waits for it.
  default_datastream_bucket_name = coalesce(var.datastream_bucket_name, "${var.project}-${var.name_prefix}-datastream")
  default_lake_bucket_name       = coalesce(var.lake_bucket_name, "${var.project}-${var.name_prefix}-lake")

  datastream_bucket_name = var.create_datastream_bucket ? google_storage_bucket.datastream[0].name : local.default_datastream_bucket_name
  lake_bucket_name       = var.create_lake_bucket ? google_storage_bucket.lake[0].name : local.default_lake_bucket_name

  lake_url = var.lake_prefix == "" ? "gs://${local.lake_bucket_name}" : "gs://${local.lake_bucket_name}/${var.lake_prefix}"

  # Object-name prefix of the Datastream output, with the trailing slash that
  # makes "cdc" not match "cdc-old/...".
  datastream_object_prefix = var.datastream_prefix == "" ? "" : "${var.datastream_prefix}/"

  # Staging lives beside the tables, under the lake prefix (DESIGN.md §1).
  staging_object_prefix = var.lake_prefix == "" ? "_staging/" : "${var.lake_prefix}/_staging/"

  firestore_database = var.create_firestore_database ? google_firestore_database.dsdelta[0].name : var.firestore_database

  functions = {
    onfile = {
      entry_point = "OnFile"
      description = "dsdelta: stages one Datastream file (decode, validate, sort) and wakes the merge."
      sizing      = var.onfile_function
    }
    merge = {
      entry_point = "Merge"
      description = "dsdelta: merges a table's staged files into its Delta tables under a Firestore lease."
      sizing      = var.merge_function
    }
    compact = {
      entry_point = "Compact"
      description = "dsdelta: scheduled compaction, checkpoints, vacuum and expiry."
      sizing      = var.compact_function
    }
  }

  function_names = { for k, _ in local.functions : k => "${local.prefix}-${k}" }

  # A user-managed service account's email is always <account_id>@<project>.iam.gserviceaccount.com.
  # Building it from the account_id (a configured value) rather than reading the
  # computed email keeps every IAM member known at plan time, so a reviewer (and
  # the tests in tests/) can see exactly who gets which role before apply.
  sa_email = {
    onfile  = "${google_service_account.onfile.account_id}@${var.project}.iam.gserviceaccount.com"
    merge   = "${google_service_account.merge.account_id}@${var.project}.iam.gserviceaccount.com"
    compact = "${google_service_account.compact.account_id}@${var.project}.iam.gserviceaccount.com"
  }
  sa_member = { for k, e in local.sa_email : k => "serviceAccount:${e}" }

  merge_budget_seconds = coalesce(var.merge_budget_seconds, floor(var.merge_function.timeout_seconds * 0.8))

  labels = merge({ app = "dsdelta", dsdelta-deployment = local.prefix }, var.labels)
}

# Project number and service agents. They depend on the API enablement so that
# (a) the service agents exist when they are read and (b) on a first plan the
# read is deferred to apply, which keeps `terraform plan` free of API reads.
data "google_project" "this" {
  project_id = var.project
  depends_on = [google_project_service.apis]
}

# Reading this data source also provisions the Cloud Storage service agent.
data "google_storage_project_service_account" "gcs" {
  project    = var.project
  depends_on = [google_project_service.apis]
}

locals {
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  gcs_service_agent    = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}
