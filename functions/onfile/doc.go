// Package onfile is the object-finalize function: it turns a Cloud Storage
// notification (an Eventarc storage CloudEvent, or a Pub/Sub message
// carrying a GCS notification) into a staged file and a merge wake-up.
// It holds no business rules: it decodes the event, calls pipeline.Stage
// and maps the outcome — transient failures return an error so the
// platform retries; bad files are quarantined, dead-lettered and
// acknowledged.
package onfile
