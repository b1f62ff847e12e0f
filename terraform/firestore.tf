# Firestore (native mode) holds the per-table leases (dsdelta_leases), the
# staged-file registry (dsdelta_files), merge batches (dsdelta_batches) and
# per-table state (dsdelta_tables). The pipeline creates the documents.

resource "google_firestore_database" "dsdelta" {
  count = var.create_firestore_database ? 1 : 0

  project     = var.project
  name        = var.firestore_database
  location_id = local.firestore_location
  type        = "FIRESTORE_NATIVE"

  delete_protection_state = var.firestore_delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  # `terraform destroy` deletes the database only when protection is off.
  deletion_policy = "DELETE"

  depends_on = [google_project_service.apis]
}

# Composite indexes of the registry's queries (shared/coord/firestore.go):
# a table's files in a given state, and a table's files, in arrival order.
# Firestore appends __name__ to each index itself.
resource "google_firestore_index" "files_by_table_state" {
  project     = var.project
  database    = local.firestore_database
  collection  = "dsdelta_files"
  query_scope = "COLLECTION"

  fields {
    field_path = "table"
    order      = "ASCENDING"
  }
  fields {
    field_path = "state"
    order      = "ASCENDING"
  }
  fields {
    field_path = "arrivalSeq"
    order      = "ASCENDING"
  }
}

resource "google_firestore_index" "files_by_table" {
  project     = var.project
  database    = local.firestore_database
  collection  = "dsdelta_files"
  query_scope = "COLLECTION"

  fields {
    field_path = "table"
    order      = "ASCENDING"
  }
  fields {
    field_path = "arrivalSeq"
    order      = "ASCENDING"
  }

  # One index build at a time on the database.
  depends_on = [google_firestore_index.files_by_table_state]
}

# TTL policies: Firestore deletes a document (typically within a day) once its
# expireAt timestamp has passed, so merged files and finished batches do not
# accumulate forever; expireAt is absent until then. Leases are not expired
# this way (their fencing token must survive). Indexing of the field is left
# as inherited: changing index settings is a separate, slow operation.
resource "google_firestore_field" "ttl" {
  for_each = toset(var.firestore_ttl_collections)

  project    = var.project
  database   = local.firestore_database
  collection = each.value
  field      = "expireAt"

  ttl_config {}

  depends_on = [google_firestore_index.files_by_table]
}
