locals {
  required_apis = concat(
    [
      "artifactregistry.googleapis.com", # function images built by Cloud Build
      "cloudbuild.googleapis.com",       # builds the function source archive
      "cloudfunctions.googleapis.com",
      "cloudscheduler.googleapis.com",
      "eventarc.googleapis.com",
      "firestore.googleapis.com",
      "iam.googleapis.com",
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "pubsub.googleapis.com",
      "run.googleapis.com", # gen2 functions run as Cloud Run services
      "storage.googleapis.com",
    ],
    var.create_datastream_stream ? ["datastream.googleapis.com"] : [],
  )
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? toset(local.required_apis) : toset([])

  project = var.project
  service = each.value

  # Other workloads in the project may use these APIs: never turn them off.
  disable_on_destroy         = false
  disable_dependent_services = false
}
