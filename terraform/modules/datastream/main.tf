# Optional Datastream stream: a connection profile for the source database
# (MySQL, PostgreSQL, Oracle or SQL Server), a Cloud Storage destination
# profile rooted at the dsdelta source prefix, and a stream writing Avro or
# JSON files there.
#
# The source database must already be prepared for CDC as Datastream requires
# (MySQL: binlog in ROW format; PostgreSQL: logical decoding, the publication
# and the replication slot named below; Oracle: archive log mode and LogMiner
# access; SQL Server: CDC enabled on the database and its tables, and for the
# transaction logs method the log retention Datastream asks for) and reachable
# from Datastream (IP allow-listing of Datastream's regional addresses, or a
# private connection). docs/deploy.md lists the steps.

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0" # as the root module (versions.tf)
    }
  }
}

locals {
  datastream_agent = "serviceAccount:service-${var.project_number}@gcp-sa-datastream.iam.gserviceaccount.com"

  default_ports = {
    mysql      = 3306
    postgresql = 5432
    oracle     = 1521
    sqlserver  = 1433
  }
  port = coalesce(var.port, local.default_ports[var.source_type])

  root_path = var.prefix == "" ? "/" : "/${var.prefix}"
}

# Datastream writes as its service agent: it needs to create objects and to
# read the bucket's metadata and objects (it validates the destination).
resource "google_storage_bucket_iam_member" "datastream_agent" {
  for_each = toset([
    "roles/storage.objectCreator",
    "roles/storage.objectViewer",
    "roles/storage.legacyBucketReader",
  ])

  bucket = var.bucket
  role   = each.value
  member = local.datastream_agent
}

resource "google_datastream_connection_profile" "source" {
  project               = var.project
  location              = var.region
  connection_profile_id = "${var.name_prefix}-source"
  display_name          = "dsdelta source (${var.source_type})"
  labels                = var.labels

  dynamic "mysql_profile" {
    for_each = var.source_type == "mysql" ? [1] : []
    content {
      hostname = var.hostname
      port     = local.port
      username = var.username
      password = var.password
    }
  }

  dynamic "postgresql_profile" {
    for_each = var.source_type == "postgresql" ? [1] : []
    content {
      hostname = var.hostname
      port     = local.port
      username = var.username
      password = var.password
      database = var.database
    }
  }

  dynamic "oracle_profile" {
    for_each = var.source_type == "oracle" ? [1] : []
    content {
      hostname         = var.hostname
      port             = local.port
      username         = var.username
      password         = var.password
      database_service = var.database
    }
  }

  dynamic "sql_server_profile" {
    for_each = var.source_type == "sqlserver" ? [1] : []
    content {
      hostname = var.hostname
      port     = local.port
      username = var.username
      password = var.password
      database = var.database
    }
  }

  dynamic "private_connectivity" {
    for_each = var.private_connection == null ? [] : [var.private_connection]
    content {
      private_connection = private_connectivity.value
    }
  }
}

resource "google_datastream_connection_profile" "destination" {
  project               = var.project
  location              = var.region
  connection_profile_id = "${var.name_prefix}-gcs"
  display_name          = "dsdelta destination (gs://${var.bucket}${local.root_path})"
  labels                = var.labels

  gcs_profile {
    bucket    = var.bucket
    root_path = local.root_path
  }

  depends_on = [google_storage_bucket_iam_member.datastream_agent]
}

resource "google_datastream_stream" "this" {
  project       = var.project
  location      = var.region
  stream_id     = "${var.name_prefix}-stream"
  display_name  = "dsdelta ${var.source_type} to gs://${var.bucket}${local.root_path}"
  desired_state = var.desired_state
  labels        = var.labels

  lifecycle {
    precondition {
      condition     = var.source_type != "postgresql" || (var.publication != "" && var.replication_slot != "" && var.database != "")
      error_message = "A PostgreSQL source needs database, publication and replication_slot (create the publication and the logical replication slot first)."
    }
    precondition {
      condition     = var.source_type != "oracle" || var.database != ""
      error_message = "An Oracle source needs database (the database service name)."
    }
    precondition {
      condition     = var.source_type != "sqlserver" || var.database != ""
      error_message = "A SQL Server source needs database (the database whose CDC-enabled tables are streamed)."
    }
  }

  source_config {
    source_connection_profile = google_datastream_connection_profile.source.id

    dynamic "mysql_source_config" {
      for_each = var.source_type == "mysql" ? [1] : []
      content {
        dynamic "include_objects" {
          for_each = length(var.include) > 0 ? [1] : []
          content {
            dynamic "mysql_databases" {
              for_each = var.include
              content {
                database = mysql_databases.value
              }
            }
          }
        }
      }
    }

    dynamic "postgresql_source_config" {
      for_each = var.source_type == "postgresql" ? [1] : []
      content {
        publication      = var.publication
        replication_slot = var.replication_slot
        dynamic "include_objects" {
          for_each = length(var.include) > 0 ? [1] : []
          content {
            dynamic "postgresql_schemas" {
              for_each = var.include
              content {
                schema = postgresql_schemas.value
              }
            }
          }
        }
      }
    }

    dynamic "oracle_source_config" {
      for_each = var.source_type == "oracle" ? [1] : []
      content {
        dynamic "include_objects" {
          for_each = length(var.include) > 0 ? [1] : []
          content {
            dynamic "oracle_schemas" {
              for_each = var.include
              content {
                schema = oracle_schemas.value
              }
            }
          }
        }
      }
    }

    dynamic "sql_server_source_config" {
      for_each = var.source_type == "sqlserver" ? [1] : []
      content {
        dynamic "include_objects" {
          for_each = length(var.include) > 0 ? [1] : []
          content {
            dynamic "schemas" {
              for_each = var.include
              content {
                schema = schemas.value
              }
            }
          }
        }

        # Always one of the two, so the stream reads what the configuration
        # says rather than an API default. Both write source_metadata.lsn,
        # which orders SQL Server events (shared/datastream/order.go).
        dynamic "change_tables" {
          for_each = var.sqlserver_cdc_method == "change_tables" ? [1] : []
          content {}
        }

        dynamic "transaction_logs" {
          for_each = var.sqlserver_cdc_method == "transaction_logs" ? [1] : []
          content {}
        }
      }
    }
  }

  destination_config {
    destination_connection_profile = google_datastream_connection_profile.destination.id
    gcs_destination_config {
      file_rotation_mb       = var.file_rotation_mb
      file_rotation_interval = var.file_rotation_interval

      dynamic "avro_file_format" {
        for_each = var.file_format == "avro" ? [1] : []
        content {}
      }

      dynamic "json_file_format" {
        for_each = var.file_format == "json" ? [1] : []
        content {
          schema_file_format = "NO_SCHEMA_FILE"
          compression        = "GZIP"
        }
      }
    }
  }

  # Backfill the existing rows first (they sort before every CDC row of the
  # same key), or stream changes only.
  dynamic "backfill_all" {
    for_each = var.backfill ? [1] : []
    content {}
  }

  dynamic "backfill_none" {
    for_each = var.backfill ? [] : [1]
    content {}
  }
}
