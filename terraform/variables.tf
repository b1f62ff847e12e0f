# ---------------------------------------------------------------------------
# Project and naming
# ---------------------------------------------------------------------------

variable "project" {
  description = "ID of the Google Cloud project that hosts the functions, buckets, topics and the Firestore database."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project must be a project ID: 6 to 30 lowercase letters, digits or hyphens, starting with a letter (not the project number or display name)."
  }
}

variable "region" {
  description = "Region of the functions, the scheduler job and (unless overridden) the buckets and the Firestore database, e.g. us-central1."
  type        = string
  default     = "us-central1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Cloud region such as us-central1 or europe-west1 (not a zone or a multi-region)."
  }
}

variable "name_prefix" {
  description = "Prefix of every resource name (functions, service accounts, topics, subscriptions, metrics). Change it to deploy several pipelines in one project."
  type        = string
  default     = "dsdelta"

  validation {
    # Service account IDs are at most 30 characters and "-compact" is the longest suffix.
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 2 to 20 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen."
  }
}

variable "labels" {
  description = "Labels added to every resource that supports them."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "labels keys must start with a lowercase letter and use lowercase letters, digits, '_' or '-' (values the same, possibly empty), at most 63 characters."
  }
}

variable "enable_apis" {
  description = "Enable the required Google APIs (never disabled on destroy). Set to false when the APIs are managed elsewhere."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------------------
# Source: the bucket Datastream writes to
# ---------------------------------------------------------------------------

variable "datastream_bucket_name" {
  description = "Bucket Datastream writes its files to (created or existing, see create_datastream_bucket). Defaults to <project>-<name_prefix>-datastream."
  type        = string
  default     = null

  validation {
    condition     = var.datastream_bucket_name == null || can(regex("^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$", var.datastream_bucket_name))
    error_message = "datastream_bucket_name must be a bucket name (3 to 63 lowercase letters, digits, '-', '_' or '.'), without gs://."
  }
}

variable "create_datastream_bucket" {
  description = "Create the Datastream bucket. Set to false to use an existing bucket that Datastream already writes to (name it in datastream_bucket_name); its settings are then yours to manage."
  type        = bool
  default     = true
}

variable "datastream_bucket_location" {
  description = "Location of the Datastream bucket (created or existing), e.g. us-central1 or US. In eventarc trigger mode the trigger must live in this location. Defaults to region."
  type        = string
  default     = null

  validation {
    condition     = var.datastream_bucket_location == null || can(regex("^[A-Za-z]+[A-Za-z0-9-]*$", var.datastream_bucket_location))
    error_message = "datastream_bucket_location must be a bucket location such as us-central1, EU or US."
  }
}

variable "datastream_prefix" {
  description = "Folder inside the Datastream bucket that holds the stream output (the destination profile root path plus the stream path), without leading or trailing slash. Empty means the whole bucket."
  type        = string
  default     = "datastream"

  validation {
    condition     = can(regex("^([A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*)?$", var.datastream_prefix))
    error_message = "datastream_prefix must be a relative folder such as datastream or cdc/prod: no leading or trailing slash, no empty segments."
  }
}

variable "source_retention_days" {
  description = "Delete Datastream files this many days after they were written (only on a bucket this configuration creates). 0 keeps them forever. Keep it longer than the longest outage you want to be able to replay."
  type        = number
  default     = 0

  validation {
    condition     = var.source_retention_days >= 0 && floor(var.source_retention_days) == var.source_retention_days
    error_message = "source_retention_days must be a whole number of days, 0 or more."
  }
}

# ---------------------------------------------------------------------------
# Lake: the bucket holding the Delta tables
# ---------------------------------------------------------------------------

variable "lake_bucket_name" {
  description = "Bucket that holds the Delta tables (gs://LAKE/<db>/<table>, <table>_log, <table>_tombstones) and the staging area. Defaults to <project>-<name_prefix>-lake."
  type        = string
  default     = null

  validation {
    condition     = var.lake_bucket_name == null || can(regex("^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$", var.lake_bucket_name))
    error_message = "lake_bucket_name must be a bucket name (3 to 63 lowercase letters, digits, '-', '_' or '.'), without gs://."
  }
}

variable "create_lake_bucket" {
  description = "Create the lake bucket. Set to false to use an existing bucket (its lifecycle and public access settings are then yours to manage)."
  type        = bool
  default     = true
}

variable "lake_prefix" {
  description = "Optional folder inside the lake bucket under which the tables live (DSDELTA_LAKE_URL = gs://LAKE/<lake_prefix>). Empty means the bucket root."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^([A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*)?$", var.lake_prefix))
    error_message = "lake_prefix must be a relative folder such as lake or prod/lake: no leading or trailing slash, no empty segments."
  }
}

variable "bucket_location" {
  description = "Location of the buckets this configuration creates (lake and function source). Defaults to region; keep it in the functions' region to avoid cross-region traffic."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_location == null || can(regex("^[A-Za-z]+[A-Za-z0-9-]*$", var.bucket_location))
    error_message = "bucket_location must be a bucket location such as us-central1, EU or US."
  }
}

variable "staging_retention_days" {
  description = "Age in days after which objects under _staging/ in the lake are deleted by a bucket lifecycle rule. Staged files are merged within minutes; this only removes leftovers, so keep it well above the longest expected outage."
  type        = number
  default     = 7

  validation {
    condition     = var.staging_retention_days >= 1 && floor(var.staging_retention_days) == var.staging_retention_days
    error_message = "staging_retention_days must be a whole number of days, at least 1."
  }
}

variable "tombstone_retention_days" {
  description = "How long a deleted key's tombstone is kept (DSDELTA_TOMBSTONE_RETENTION). A stale change older than this can no longer be told apart from a new insert."
  type        = number
  default     = 7

  validation {
    condition     = var.tombstone_retention_days >= 1 && floor(var.tombstone_retention_days) == var.tombstone_retention_days
    error_message = "tombstone_retention_days must be a whole number of days, at least 1."
  }
}

variable "force_destroy_buckets" {
  description = "Allow `terraform destroy` to delete buckets this configuration created even when they still hold objects. Leave false in production: it deletes the lake."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------------------
# Firestore (lease, file registry, batches)
# ---------------------------------------------------------------------------

variable "firestore_database" {
  description = "Firestore database ID used for the table leases and the staged-file registry. A named database keeps dsdelta apart from an application's (default) database."
  type        = string
  default     = "dsdelta"

  validation {
    condition     = var.firestore_database == "(default)" || can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.firestore_database))
    error_message = "firestore_database must be \"(default)\" or 4 to 63 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "create_firestore_database" {
  description = "Create the Firestore database (native mode). Set to false to use an existing native-mode database named firestore_database."
  type        = bool
  default     = true
}

variable "firestore_location" {
  description = "Location of the Firestore database: a region (e.g. us-central1) or a multi-region (nam5, eur3). Defaults to region."
  type        = string
  default     = null

  validation {
    condition     = var.firestore_location == null || can(regex("^[a-z]+[a-z0-9-]*$", var.firestore_location))
    error_message = "firestore_location must be a Firestore location such as us-central1, nam5 or eur3."
  }
}

variable "firestore_delete_protection" {
  description = "Enable delete protection on the Firestore database this configuration creates."
  type        = bool
  default     = true
}

variable "firestore_ttl_collections" {
  description = "Collection groups whose documents carry an expireAt timestamp that Firestore's TTL policy should honour. Leases are left out on purpose: deleting a lease document would reset its fencing token."
  type        = list(string)
  default     = ["dsdelta_files", "dsdelta_batches"]

  validation {
    condition     = alltrue([for c in var.firestore_ttl_collections : can(regex("^[A-Za-z0-9_-]{1,100}$", c))])
    error_message = "firestore_ttl_collections must hold collection group IDs (letters, digits, '_' or '-')."
  }
}

# ---------------------------------------------------------------------------
# Triggers, Pub/Sub delivery
# ---------------------------------------------------------------------------

variable "trigger_mode" {
  description = "How onfile learns about new Datastream files: \"pubsub\" (a GCS notification into a topic, pushed to onfile by a subscription with retry and dead-letter policies; filtered by datastream_prefix at the source) or \"eventarc\" (an Eventarc object-finalized trigger on the bucket; retried for up to 24 hours, no dead-letter topic)."
  type        = string
  default     = "pubsub"

  validation {
    condition     = contains(["pubsub", "eventarc"], var.trigger_mode)
    error_message = "trigger_mode must be \"pubsub\" or \"eventarc\"."
  }
}

variable "max_delivery_attempts" {
  description = "Deliveries of a Pub/Sub message (file notification, merge wake-up, compaction tick) before it is moved to the dead-letter topic."
  type        = number
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100 && floor(var.max_delivery_attempts) == var.max_delivery_attempts
    error_message = "max_delivery_attempts must be a whole number between 5 and 100 (Pub/Sub's limits)."
  }
}

variable "retry_minimum_backoff_seconds" {
  description = "Minimum delay before Pub/Sub redelivers a message whose function call failed (exponential backoff)."
  type        = number
  default     = 10

  validation {
    condition     = var.retry_minimum_backoff_seconds >= 0 && var.retry_minimum_backoff_seconds <= 600
    error_message = "retry_minimum_backoff_seconds must be between 0 and 600."
  }
}

variable "retry_maximum_backoff_seconds" {
  description = "Maximum delay between redeliveries of a failed message (exponential backoff)."
  type        = number
  default     = 600

  validation {
    condition     = var.retry_maximum_backoff_seconds >= 1 && var.retry_maximum_backoff_seconds <= 600
    error_message = "retry_maximum_backoff_seconds must be between 1 and 600."
  }
}

# ---------------------------------------------------------------------------
# Compaction schedule
# ---------------------------------------------------------------------------

variable "compaction_schedule" {
  description = "Cron schedule (five fields, Cloud Scheduler syntax) of the compaction run: bin-packing, clustering, checkpoints, vacuum and expiry of logs, tombstones and staging."
  type        = string
  default     = "15 * * * *"

  validation {
    condition     = length(regexall("^\\S+\\s+\\S+\\s+\\S+\\s+\\S+\\s+\\S+$", trimspace(var.compaction_schedule))) == 1
    error_message = "compaction_schedule must be a five-field cron expression such as \"15 * * * *\"."
  }
}

variable "compaction_time_zone" {
  description = "Time zone (tz database name) in which compaction_schedule is interpreted."
  type        = string
  default     = "Etc/UTC"

  validation {
    condition     = can(regex("^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$", var.compaction_time_zone))
    error_message = "compaction_time_zone must be a tz database name such as Etc/UTC or Europe/Paris."
  }
}

variable "compaction_message" {
  description = "JSON body of the message the compaction job (on compaction_schedule) publishes to the compaction topic. The compact function reads its \"tasks\" list: the default \"{}\" names no task and means everything, i.e. a reconcile of the Datastream bucket and the maintenance of every table; {\"tasks\":[\"reconcile\"]} (what the reconcile job publishes, see reconcile_schedule) means the reconcile only."
  type        = string
  default     = "{}"

  validation {
    condition     = can(jsondecode(var.compaction_message))
    error_message = "compaction_message must be valid JSON."
  }
}

# ---------------------------------------------------------------------------
# Reconcile: no Datastream file is lost when its notification is
# ---------------------------------------------------------------------------

variable "reconcile_schedule" {
  description = "Cron schedule (five fields, Cloud Scheduler syntax, in compaction_time_zone) of the reconcile job. It publishes {\"tasks\":[\"reconcile\"]} to the compaction topic: the compact function then lists the Datastream bucket from each table folder's watermark and hands every data file the registry does not know (and older than reconcile_grace) to onfile through the reconcile topic, a bounded number per tick (reconcile_max_files in dsdelta_config, default 2000). It catches files whose notification was lost (first deploy onto a running stream, a dead-lettered notification, a broken trigger) and must run more often than compaction_schedule, whose \"{}\" message reconciles too."
  type        = string
  default     = "*/10 * * * *"

  validation {
    condition     = length(regexall("^\\S+\\s+\\S+\\s+\\S+\\s+\\S+\\s+\\S+$", trimspace(var.reconcile_schedule))) == 1
    error_message = "reconcile_schedule must be a five-field cron expression such as \"*/10 * * * *\"."
  }
}

variable "reconcile_grace" {
  description = "How old a Datastream file the registry does not know must be before the reconcile stages it (DSDELTA_RECONCILE_GRACE): younger files are left to their notification, which is usually still in flight. A duration in hours, minutes and seconds (Go syntax), e.g. 10m, 1h30m; from 1 minute to 24 hours. A shorter grace catches lost files sooner but may stage a file whose notification was only slow (harmless: the second staging is a no-op) and so count it as reconciled."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^([0-9]+h)?([0-9]+m)?([0-9]+s)?$", var.reconcile_grace)) && var.reconcile_grace != ""
    error_message = "reconcile_grace must be a duration such as 10m, 90s or 1h30m (units h, m, s; no spaces, no days)."
  }
  validation {
    condition = !can(regex("^([0-9]+h)?([0-9]+m)?([0-9]+s)?$", var.reconcile_grace)) || var.reconcile_grace == "" || (
      sum(concat([0], [for m in regexall("([0-9]+)([hms])", var.reconcile_grace) : tonumber(m[0]) * lookup({ h = 3600, m = 60, s = 1 }, m[1])])) >= 60 &&
      sum(concat([0], [for m in regexall("([0-9]+)([hms])", var.reconcile_grace) : tonumber(m[0]) * lookup({ h = 3600, m = 60, s = 1 }, m[1])])) <= 86400
    )
    error_message = "reconcile_grace must be between 1m and 24h: below a minute the reconcile races notifications still in flight, and 0 would mean the built-in default."
  }
}

variable "reconcile_lookback" {
  description = "How far behind the newest folder of a table, in Datastream folder time, each reconcile lists again to find files written late into older minute folders (DSDELTA_RECONCILE_LOOKBACK). Folders still receiving files (a backfill's) are listed whatever their age. A duration in hours, minutes and seconds (Go syntax), e.g. 2h; from 10 minutes to 168 hours, and longer than reconcile_grace (a file must still be in the window once it is old enough to be reconciled). Longer costs more listing per tick."
  type        = string
  default     = "2h"

  validation {
    condition     = can(regex("^([0-9]+h)?([0-9]+m)?([0-9]+s)?$", var.reconcile_lookback)) && var.reconcile_lookback != ""
    error_message = "reconcile_lookback must be a duration such as 2h, 90m or 1h30m (units h, m, s; no spaces, no days)."
  }
  validation {
    condition = !can(regex("^([0-9]+h)?([0-9]+m)?([0-9]+s)?$", var.reconcile_lookback)) || var.reconcile_lookback == "" || (
      sum(concat([0], [for m in regexall("([0-9]+)([hms])", var.reconcile_lookback) : tonumber(m[0]) * lookup({ h = 3600, m = 60, s = 1 }, m[1])])) >= 600 &&
      sum(concat([0], [for m in regexall("([0-9]+)([hms])", var.reconcile_lookback) : tonumber(m[0]) * lookup({ h = 3600, m = 60, s = 1 }, m[1])])) <= 604800
    )
    error_message = "reconcile_lookback must be between 10m and 168h."
  }
}

variable "reconcile_since" {
  description = "RFC 3339 instant (e.g. 2026-01-01T00:00:00Z) before which the reconcile never loads a Datastream file: files in folders older than it are left out (DSDELTA_RECONCILE_SINCE). Use it to start the first load of a long-running stream at a recent point instead of at its first file; files before it can still be staged with `dsdelta replay`. Empty (the default) means every file under datastream_prefix. Datastream writes a backfill's files under the backfill's start time: an instant after the last backfill leaves out every row not changed since."
  type        = string
  default     = ""

  validation {
    condition = var.reconcile_since == "" || (
      can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$", var.reconcile_since)) &&
      can(formatdate("YYYY", var.reconcile_since))
    )
    error_message = "reconcile_since must be empty or an RFC 3339 date and time with its offset, such as 2026-01-01T00:00:00Z or 2026-01-01T01:00:00+01:00."
  }
}

# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------

variable "go_runtime" {
  description = "Cloud Functions runtime. The go directive in go.mod must not be newer than this runtime."
  type        = string
  default     = "go126"

  validation {
    condition     = can(regex("^go[0-9]{3}$", var.go_runtime))
    error_message = "go_runtime must be a Go runtime ID such as go126."
  }
}

variable "source_archive_path" {
  description = "Path of a prebuilt zip of the repository root to deploy. When null, Terraform zips the repository root itself (without .git, terraform, docs, bench and CI files)."
  type        = string
  default     = null

  validation {
    condition     = var.source_archive_path == null || can(regex("\\.zip$", var.source_archive_path))
    error_message = "source_archive_path must name a .zip file."
  }
}

variable "onfile_function" {
  description = "Sizing of the onfile function (decodes and stages one Datastream file per call). memory uses Cloud Run units (512Mi, 1Gi); cpu is optional (e.g. \"1\"); timeout_seconds is at most 540 for event-driven functions."
  type = object({
    memory          = optional(string, "1Gi")
    cpu             = optional(string)
    timeout_seconds = optional(number, 300)
    max_instances   = optional(number, 50)
    min_instances   = optional(number, 0)
  })
  default = {}

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|M|G)$", var.onfile_function.memory))
    error_message = "onfile_function.memory must be a size such as 512Mi, 1Gi or 2G."
  }
  validation {
    condition     = var.onfile_function.timeout_seconds >= 10 && var.onfile_function.timeout_seconds <= 540
    error_message = "onfile_function.timeout_seconds must be between 10 and 540."
  }
  validation {
    condition     = var.onfile_function.max_instances >= 1 && var.onfile_function.min_instances >= 0 && var.onfile_function.min_instances <= var.onfile_function.max_instances
    error_message = "onfile_function needs max_instances >= 1 and 0 <= min_instances <= max_instances."
  }
}

variable "merge_function" {
  description = "Sizing of the merge function (merges one table's staged batch per call; 512Mi is enough for any table size, more memory speeds up large batches)."
  type = object({
    memory          = optional(string, "1Gi")
    cpu             = optional(string)
    timeout_seconds = optional(number, 540)
    max_instances   = optional(number, 20)
    min_instances   = optional(number, 0)
  })
  default = {}

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|M|G)$", var.merge_function.memory))
    error_message = "merge_function.memory must be a size such as 512Mi, 1Gi or 2G."
  }
  validation {
    condition     = var.merge_function.timeout_seconds >= 60 && var.merge_function.timeout_seconds <= 540
    error_message = "merge_function.timeout_seconds must be between 60 and 540."
  }
  validation {
    condition     = var.merge_function.max_instances >= 1 && var.merge_function.min_instances >= 0 && var.merge_function.min_instances <= var.merge_function.max_instances
    error_message = "merge_function needs max_instances >= 1 and 0 <= min_instances <= max_instances."
  }
}

variable "compact_function" {
  description = "Sizing of the compact function (bin-packs, clusters, checkpoints and vacuums tables on the compaction schedule)."
  type = object({
    memory          = optional(string, "2Gi")
    cpu             = optional(string)
    timeout_seconds = optional(number, 540)
    max_instances   = optional(number, 5)
    min_instances   = optional(number, 0)
  })
  default = {}

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|M|G)$", var.compact_function.memory))
    error_message = "compact_function.memory must be a size such as 512Mi, 1Gi or 2G."
  }
  validation {
    condition     = var.compact_function.timeout_seconds >= 60 && var.compact_function.timeout_seconds <= 540
    error_message = "compact_function.timeout_seconds must be between 60 and 540."
  }
  validation {
    condition     = var.compact_function.max_instances >= 1 && var.compact_function.min_instances >= 0 && var.compact_function.min_instances <= var.compact_function.max_instances
    error_message = "compact_function needs max_instances >= 1 and 0 <= min_instances <= max_instances."
  }
}

variable "merge_budget_seconds" {
  description = "Time a merge or compaction call may spend before it stops starting new work and returns (DSDELTA_MERGE_BUDGET). Must stay below the function timeout so the lease is released cleanly. Defaults to 80% of the timeout."
  type        = number
  default     = null

  validation {
    condition     = var.merge_budget_seconds == null || try(var.merge_budget_seconds >= 10, false)
    error_message = "merge_budget_seconds must be at least 10."
  }
}

variable "log_level" {
  description = "Log level of the functions (DSDELTA_LOG_LEVEL)."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be one of debug, info, warn, error."
  }
}

variable "dsdelta_config" {
  description = "Optional dsdelta configuration (YAML or JSON, inline) passed as DSDELTA_CONFIG: include/exclude patterns, per-table overrides, and the limits that bound the functions' memory: batch_max_events (default 100000 change events a merge holds at once; a larger batch is merged in key-range steps), batch_max_source_bytes (default 1073741824 bytes of Datastream files per merge batch), batch_max_files (default 500), batch_max_bytes (default 268435456 bytes of staged Parquet per merge batch) and max_record_bytes (default 134217728: a Datastream record larger than this quarantines its file); and the reconcile's per-tick bounds, reconcile_max_files (default 2000 files handed to onfile per tick) and reconcile_max_listed (default 100000 objects listed per tick). Empty means defaults."
  type        = string
  default     = ""
}

# ---------------------------------------------------------------------------
# Monitoring
# ---------------------------------------------------------------------------

variable "enable_alerts" {
  description = "Create the alert policies (quarantined files, files reconciled because their notification was lost, merge lag, function errors, dead-lettered messages). The log-based metrics are always created."
  type        = bool
  default     = true
}

variable "alert_notification_channels" {
  description = "Cloud Monitoring notification channel IDs (projects/<p>/notificationChannels/<id>) the alert policies notify."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.alert_notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "alert_notification_channels must hold IDs of the form projects/<project>/notificationChannels/<id>."
  }
}

variable "merge_lag_alert_seconds" {
  description = "Alert when the 99th percentile of the merge lag (source commit to Delta commit) stays above this many seconds for 10 minutes."
  type        = number
  default     = 900

  validation {
    condition     = var.merge_lag_alert_seconds > 0
    error_message = "merge_lag_alert_seconds must be positive."
  }
}

variable "function_error_alert_threshold" {
  description = "Alert when the functions log more than this many errors in 5 minutes. Transient errors are retried by design, so a few are expected."
  type        = number
  default     = 5

  validation {
    condition     = var.function_error_alert_threshold >= 0
    error_message = "function_error_alert_threshold must be 0 or more."
  }
}

# ---------------------------------------------------------------------------
# Optional: let Terraform create the Datastream stream itself
# ---------------------------------------------------------------------------

variable "create_datastream_stream" {
  description = "Create a Datastream connection profile for the source database, a GCS destination profile and a stream writing to the Datastream bucket and prefix (see the datastream variable). Off by default: most users point an existing stream at the bucket."
  type        = bool
  default     = false
}

variable "datastream" {
  description = "Settings of the Datastream stream created when create_datastream_stream is true. source_type is mysql, postgresql, oracle or sqlserver; database is the PostgreSQL or SQL Server database or the Oracle service name; include lists the databases (MySQL) or schemas (PostgreSQL, Oracle, SQL Server) to stream, all when empty; sqlserver_cdc_method is change_tables (default) or transaction_logs; private_connection is an optional Datastream private connection ID (IP allow-listing otherwise); desired_state is RUNNING or NOT_STARTED for a new stream, PAUSED only for one that exists (the provider refuses to create a paused stream)."
  type = object({
    source_type            = optional(string, "mysql")
    hostname               = optional(string, "")
    port                   = optional(number)
    username               = optional(string, "")
    database               = optional(string, "")
    include                = optional(list(string), [])
    publication            = optional(string, "")
    replication_slot       = optional(string, "")
    sqlserver_cdc_method   = optional(string, "change_tables")
    file_format            = optional(string, "avro")
    file_rotation_mb       = optional(number, 50)
    file_rotation_interval = optional(string, "60s")
    backfill               = optional(bool, true)
    desired_state          = optional(string, "RUNNING")
    private_connection     = optional(string)
  })
  default = {}

  validation {
    condition     = contains(["mysql", "postgresql", "oracle", "sqlserver"], var.datastream.source_type)
    error_message = "datastream.source_type must be mysql, postgresql, oracle or sqlserver."
  }
  validation {
    condition     = contains(["change_tables", "transaction_logs"], var.datastream.sqlserver_cdc_method)
    error_message = "datastream.sqlserver_cdc_method must be change_tables or transaction_logs."
  }
  validation {
    condition     = contains(["avro", "json"], var.datastream.file_format)
    error_message = "datastream.file_format must be avro or json."
  }
  validation {
    condition     = contains(["RUNNING", "NOT_STARTED", "PAUSED"], var.datastream.desired_state)
    error_message = "datastream.desired_state must be RUNNING, NOT_STARTED or PAUSED."
  }
  validation {
    condition     = can(regex("^[0-9]+s$", var.datastream.file_rotation_interval))
    error_message = "datastream.file_rotation_interval must be a duration in seconds such as 60s."
  }
  validation {
    condition     = var.datastream.file_rotation_mb >= 1 && var.datastream.file_rotation_mb <= 1024
    error_message = "datastream.file_rotation_mb must be between 1 and 1024."
  }
}

variable "datastream_source_password" {
  description = "Password of the Datastream source database user (only with create_datastream_stream). Pass it through TF_VAR_datastream_source_password rather than a tfvars file."
  type        = string
  default     = null
  sensitive   = true
}
