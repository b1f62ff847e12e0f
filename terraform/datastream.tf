# Optional: Terraform creates the Datastream stream that feeds dsdelta.
# Off by default; most deployments point an existing stream at the bucket.
module "datastream" {
  source = "./modules/datastream"
  count  = var.create_datastream_stream ? 1 : 0

  project        = var.project
  project_number = data.google_project.this.number
  region         = var.region
  name_prefix    = local.prefix
  labels         = local.labels

  bucket = local.datastream_bucket_name
  prefix = var.datastream_prefix

  source_type            = var.datastream.source_type
  hostname               = var.datastream.hostname
  port                   = var.datastream.port
  username               = var.datastream.username
  password               = var.datastream_source_password
  database               = var.datastream.database
  include                = var.datastream.include
  publication            = var.datastream.publication
  replication_slot       = var.datastream.replication_slot
  sqlserver_cdc_method   = var.datastream.sqlserver_cdc_method
  file_format            = var.datastream.file_format
  file_rotation_mb       = var.datastream.file_rotation_mb
  file_rotation_interval = var.datastream.file_rotation_interval
  backfill               = var.datastream.backfill
  desired_state          = var.datastream.desired_state
  private_connection     = var.datastream.private_connection

  # Files must not appear before onfile and its trigger can take them.
  depends_on = [
    google_cloudfunctions2_function.onfile,
    google_storage_notification.datastream,
  ]
}
