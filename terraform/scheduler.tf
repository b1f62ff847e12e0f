# Compaction tick: Cloud Scheduler publishes to the compaction topic, whose
# push subscription (pubsub.tf) calls the compact function. Cloud Scheduler
# publishes as its own service agent, which already holds publish rights.
resource "google_cloud_scheduler_job" "compact" {
  project     = var.project
  region      = var.region
  name        = "${local.prefix}-compact"
  description = "dsdelta: periodic compaction, checkpoints, vacuum and expiry of every table."
  schedule    = var.compaction_schedule
  time_zone   = var.compaction_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.compact.id
    data       = base64encode(var.compaction_message)
    attributes = {
      origin = "cloud-scheduler"
    }
  }

  # Publishing rarely fails; when it does, the next tick does the same work.
  retry_config {
    retry_count = 3
  }

  depends_on = [google_project_service.apis]
}
