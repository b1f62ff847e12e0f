output "datastream_bucket" {
  description = "Bucket Datastream writes to (point the stream's destination profile here)."
  value       = local.datastream_bucket_name
}

output "datastream_prefix" {
  description = "Folder of the Datastream output inside datastream_bucket (the destination profile root path plus the stream path)."
  value       = var.datastream_prefix
}

output "lake_bucket" {
  description = "Bucket holding the Delta tables."
  value       = local.lake_bucket_name
}

output "lake_url" {
  description = "Root of the lake: tables are at <lake_url>/<db>/<table> (current state) and <lake_url>/<db>/<table>_log (history)."
  value       = local.lake_url
}

output "function_source_bucket" {
  description = "Bucket holding the function source archives."
  value       = google_storage_bucket.function_source.name
}

output "firestore_database" {
  description = "Firestore database holding leases and the file registry."
  value       = local.firestore_database
}

output "topics" {
  description = "Pub/Sub topics: file_events (GCS notifications, null in eventarc mode), reconcile (files the reconcile found unannounced, pushed to onfile), wake (merge wake-ups), compact (scheduler ticks: compaction and reconcile), dead_letter."
  value = {
    file_events = var.trigger_mode == "pubsub" ? google_pubsub_topic.file_events[0].id : null
    reconcile   = google_pubsub_topic.reconcile.id
    wake        = google_pubsub_topic.wake.id
    compact     = google_pubsub_topic.compact.id
    dead_letter = google_pubsub_topic.dead_letter.id
  }
}

output "dead_letter_subscription" {
  description = "Pull subscription holding dead-lettered messages and quarantine notices."
  value       = google_pubsub_subscription.dead_letter.id
}

output "function_uris" {
  description = "Cloud Run URLs of the functions (internal ingress, authenticated)."
  value = {
    onfile  = google_cloudfunctions2_function.onfile.service_config[0].uri
    merge   = google_cloudfunctions2_function.merge.service_config[0].uri
    compact = google_cloudfunctions2_function.compact.service_config[0].uri
  }
}

output "service_accounts" {
  description = "Service account of each function."
  value       = local.sa_email
}

output "trigger_mode" {
  description = "How onfile is triggered: pubsub or eventarc."
  value       = var.trigger_mode
}

output "datastream_stream" {
  description = "ID of the Datastream stream created by this configuration, or null when create_datastream_stream is false."
  value       = var.create_datastream_stream ? module.datastream[0].stream_id : null
}

output "status_command" {
  description = "Command that shows the pipeline's state: pending, staged, merged and quarantined files, leases, table versions and lag."
  value       = "dsdelta status --project ${var.project} --lake ${local.lake_url} --firestore-database ${local.firestore_database}"
}

output "dashboard_url" {
  description = "Cloud Monitoring dashboard of the pipeline: lag and events merged per table, files, the functions' duration, errors, instances and memory, dead letters."
  value       = "https://console.cloud.google.com/monitoring/dashboards/builder/${regex("[^/]+$", google_monitoring_dashboard.dsdelta.id)}?project=${var.project}"
}
