variable "project" {
  description = "Project ID hosting the stream."
  type        = string
}

variable "project_number" {
  description = "Project number (names the Datastream service agent that writes to the bucket)."
  type        = string
}

variable "region" {
  description = "Datastream region of the connection profiles and the stream."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of the connection profile and stream IDs."
  type        = string
}

variable "labels" {
  description = "Labels of the profiles and the stream."
  type        = map(string)
  default     = {}
}

variable "bucket" {
  description = "Bucket the stream writes to (the dsdelta source bucket)."
  type        = string
}

variable "prefix" {
  description = "Folder inside the bucket the stream writes under (the dsdelta source prefix), without leading or trailing slash; empty for the bucket root."
  type        = string
  default     = ""
}

variable "source_type" {
  description = "Source database engine: mysql, postgresql, oracle or sqlserver."
  type        = string

  validation {
    condition     = contains(["mysql", "postgresql", "oracle", "sqlserver"], var.source_type)
    error_message = "source_type must be mysql, postgresql, oracle or sqlserver."
  }
}

variable "hostname" {
  description = "Host name or IP address of the source database."
  type        = string

  validation {
    condition     = length(var.hostname) > 0
    error_message = "hostname of the source database is required to create the Datastream stream."
  }
}

variable "port" {
  description = "Port of the source database; the engine's default when null."
  type        = number
  default     = null
}

variable "username" {
  description = "Database user Datastream connects as."
  type        = string

  validation {
    condition     = length(var.username) > 0
    error_message = "username of the source database is required to create the Datastream stream."
  }
}

variable "password" {
  description = "Password of the database user."
  type        = string
  sensitive   = true

  validation {
    condition     = var.password != null && try(length(var.password) > 0, false)
    error_message = "password of the source database user is required to create the Datastream stream (set TF_VAR_datastream_source_password)."
  }
}

variable "database" {
  description = "PostgreSQL or SQL Server database name, or Oracle database service name. Unused for MySQL."
  type        = string
  default     = ""
}

variable "include" {
  description = "Databases (MySQL) or schemas (PostgreSQL, Oracle, SQL Server) to stream; every object when empty."
  type        = list(string)
  default     = []
}

variable "publication" {
  description = "PostgreSQL publication Datastream reads (must exist)."
  type        = string
  default     = ""
}

variable "replication_slot" {
  description = "PostgreSQL logical replication slot Datastream uses (must exist)."
  type        = string
  default     = ""
}

variable "sqlserver_cdc_method" {
  description = "How Datastream reads SQL Server changes: change_tables (the CDC change tables; a read-only login, no log retention to manage, but no column changes while streaming) or transaction_logs (the log itself; faster, but needs db_owner and logs kept until read). Unused for the other sources."
  type        = string
  default     = "change_tables"

  validation {
    condition     = contains(["change_tables", "transaction_logs"], var.sqlserver_cdc_method)
    error_message = "sqlserver_cdc_method must be change_tables or transaction_logs."
  }
}

variable "file_format" {
  description = "Format of the files written: avro or json (JSON lines, gzip-compressed)."
  type        = string
  default     = "avro"

  validation {
    condition     = contains(["avro", "json"], var.file_format)
    error_message = "file_format must be avro or json."
  }
}

variable "file_rotation_mb" {
  description = "Maximum size of a file before Datastream starts the next one."
  type        = number
  default     = 50
}

variable "file_rotation_interval" {
  description = "Maximum age of a file before Datastream starts the next one (duration in seconds, e.g. 60s). Smaller means lower lag and more files."
  type        = string
  default     = "60s"
}

variable "backfill" {
  description = "Backfill the existing rows before streaming changes."
  type        = bool
  default     = true
}

variable "desired_state" {
  description = "State to leave the stream in: RUNNING, NOT_STARTED or PAUSED. The provider creates a stream only as RUNNING or NOT_STARTED (PAUSED fails the plan of a new stream) and never moves one back to NOT_STARTED."
  type        = string
  default     = "RUNNING"
}

variable "private_connection" {
  description = "Optional Datastream private connection ID (projects/<p>/locations/<r>/privateConnections/<id>); IP allow-listing otherwise."
  type        = string
  default     = null
}
