output "stream_id" {
  description = "Full ID of the Datastream stream."
  value       = google_datastream_stream.this.id
}

output "source_connection_profile_id" {
  description = "Full ID of the source connection profile."
  value       = google_datastream_connection_profile.source.id
}

output "destination_connection_profile_id" {
  description = "Full ID of the Cloud Storage destination connection profile."
  value       = google_datastream_connection_profile.destination.id
}

output "cdc_method" {
  description = "How the stream reads SQL Server changes (change_tables or transaction_logs); null for the other sources."
  value       = var.source_type == "sqlserver" ? var.sqlserver_cdc_method : null
}
