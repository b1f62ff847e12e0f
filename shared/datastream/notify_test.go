package datastream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const objectResource = `{"kind":"storage#object","id":"test_bucket_upvn/p/public_t/2024/06/13/11/19/7bb3_postgresql-backfill_-96622484_7_17761.avro/1718277583065345","name":"p/public_t/2024/06/13/11/19/7bb3_postgresql-backfill_-96622484_7_17761.avro","bucket":"test_bucket_upvn","generation":"1718277583065345","metageneration":"1","contentType":"application/octet-stream","timeCreated":"2024-06-13T11:19:43.068Z","size":"114082"}`

func TestParseNotification(t *testing.T) {
	attrs := `{"bucketId":"test_bucket_upvn","objectId":"p/public_t/2024/06/13/11/19/7bb3_postgresql-backfill_-96622484_7_17761.avro","objectGeneration":"1718277583065345","eventType":"OBJECT_FINALIZE","payloadFormat":"JSON_API_V1","notificationConfig":"projects/_/buckets/test_bucket_upvn/notificationConfigs/1"}`
	push := `{"message":{"attributes":` + attrs + `,"data":"` + base64.StdEncoding.EncodeToString([]byte(objectResource)) + `","messageId":"1"},"subscription":"projects/p/subscriptions/s"}`
	want := SourceFile{Bucket: "test_bucket_upvn", Name: "p/public_t/2024/06/13/11/19/7bb3_postgresql-backfill_-96622484_7_17761.avro", Generation: 1718277583065345, Size: 114082}
	tests := []struct {
		name      string
		ceType    string
		data      string
		eventType string
	}{
		{"an Eventarc finalized event with string generation and size", StorageFinalizedType, objectResource, StorageFinalizedType},
		{"an Eventarc finalized event with numeric generation and size", StorageFinalizedType,
			`{"bucket":"test_bucket_upvn","name":"` + want.Name + `","generation":1718277583065345,"size":114082}`, StorageFinalizedType},
		{"a Pub/Sub messagePublished event carrying a GCS notification", PubSubPublishedType, push, "OBJECT_FINALIZE"},
		{"a Pub/Sub push body recognised by its shape", "", push, "OBJECT_FINALIZE"},
		{"a storage object recognised by its shape", "", objectResource, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNotification(tt.ceType, []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			w := want
			w.EventType = tt.eventType
			if strings.Contains(tt.data, "timeCreated") || tt.data == push {
				w.Created = time.Date(2024, 6, 13, 11, 19, 43, 68_000_000, time.UTC)
			}
			if got != w {
				t.Errorf("got %+v, want %+v", got, w)
			}
			if reason, skip := Skip(got); skip {
				t.Errorf("a finalized Avro file is skipped: %s", reason)
			}
		})
	}
}

func TestParsePubSubNotificationWithoutBody(t *testing.T) {
	got, err := ParsePubSubNotification(map[string]string{
		"bucketId": "b", "objectId": "x/f.jsonl.gz", "objectGeneration": "7", "eventType": "OBJECT_FINALIZE", "payloadFormat": "NONE",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != (SourceFile{Bucket: "b", Name: "x/f.jsonl.gz", Generation: 7, Size: -1, EventType: "OBJECT_FINALIZE"}) {
		t.Errorf("got %+v", got)
	}
	if reason, skip := Skip(got); skip {
		t.Errorf("an object of unknown size is skipped: %s", reason)
	}
}

func TestParseNotificationRefusesBadInput(t *testing.T) {
	tests := []struct {
		name   string
		ceType string
		data   string
	}{
		{"no bucket", StorageFinalizedType, `{"name":"a.avro","generation":"1","size":"3"}`},
		{"no name", StorageFinalizedType, `{"bucket":"b","generation":"1","size":"3"}`},
		{"no generation", StorageFinalizedType, `{"bucket":"b","name":"a.avro","size":"3"}`},
		{"a generation that is not a number", StorageFinalizedType, `{"bucket":"b","name":"a.avro","generation":"x","size":"3"}`},
		{"a negative size", StorageFinalizedType, `{"bucket":"b","name":"a.avro","generation":"1","size":"-3"}`},
		{"not JSON", StorageFinalizedType, `{`},
		{"a Pub/Sub message without eventType", PubSubPublishedType, `{"message":{"attributes":{"bucketId":"b","objectId":"a.avro"}}}`},
		{"a Pub/Sub message whose data is not base64", PubSubPublishedType, `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"%%%"}}`},
		{"an unknown event type", "google.cloud.audit.log.v1.written", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseNotification(tt.ceType, []byte(tt.data)); !errors.Is(err, ErrBadNotification) {
				t.Errorf("err = %v, want ErrBadNotification", err)
			}
		})
	}
}

func TestBadNotificationsKeepTheParseErrorInTheChain(t *testing.T) {
	var syntax *json.SyntaxError
	var notBase64 base64.CorruptInputError
	tests := []struct {
		name   string
		ceType string
		data   string
		cause  func(error) bool
	}{
		{"storage object data that is not JSON", StorageFinalizedType, `{`, func(err error) bool { return errors.As(err, &syntax) }},
		{"a Pub/Sub envelope that is not JSON", PubSubPublishedType, `{"message":`, func(err error) bool { return errors.As(err, &syntax) }},
		{"a Pub/Sub message whose data is not base64", PubSubPublishedType, `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"%%%"}}`, func(err error) bool { return errors.As(err, &notBase64) }},
		{"a Pub/Sub body that is not JSON", PubSubPublishedType, `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"` + base64.StdEncoding.EncodeToString([]byte("{")) + `"}}`, func(err error) bool { return errors.As(err, &syntax) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseNotification(tt.ceType, []byte(tt.data))
			if !errors.Is(err, ErrBadNotification) || !tt.cause(err) {
				t.Errorf("err = %v, want ErrBadNotification wrapping the parse error", err)
			}
		})
	}
}

func TestSkip(t *testing.T) {
	tests := []struct {
		name string
		f    SourceFile
		skip bool
	}{
		{"an Avro file is kept", SourceFile{Name: "a/b.avro", Size: 10}, false},
		{"a JSON lines file is kept", SourceFile{Name: "a/b.jsonl", Size: 10}, false},
		{"a gzip JSON lines file is kept", SourceFile{Name: "a/b.jsonl.gz", Size: 10}, false},
		{"a JSON file is kept", SourceFile{Name: "a/b.json", Size: 10}, false},
		{"a folder placeholder is skipped", SourceFile{Name: "a/public_t/2024/03/29/", Size: 0}, true},
		{"an empty object is skipped", SourceFile{Name: "a/b.avro", Size: 0}, true},
		{"a schema file is skipped", SourceFile{Name: "a/b.avsc", Size: 10}, true},
		{"a text file is skipped", SourceFile{Name: "a/notes.txt", Size: 10}, true},
		{"an extension-less Datastream file is kept", SourceFile{Name: "a.b/x/d32354_oracle-cdc-logminer_21989784_0_0", Size: 10}, false},
		{"a delete event is skipped", SourceFile{Name: "a/b.avro", Size: 10, EventType: "OBJECT_DELETE"}, true},
		{"a metadata update is skipped", SourceFile{Name: "a/b.avro", Size: 10, EventType: "OBJECT_METADATA_UPDATE"}, true},
		{"an archive event is skipped", SourceFile{Name: "a/b.avro", Size: 10, EventType: "google.cloud.storage.object.v1.archived"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, skip := Skip(tt.f)
			if skip != tt.skip || (skip && reason == "") {
				t.Errorf("Skip = %q, %v; want skip %v with a reason", reason, skip, tt.skip)
			}
		})
	}
}
