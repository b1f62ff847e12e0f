package datastream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBadNotification marks a notification that does not describe an object.
var ErrBadNotification = errors.New("bad storage notification")

// SourceFile identifies one generation of a Cloud Storage object.
type SourceFile struct {
	Bucket     string
	Name       string
	Generation int64
	// Size in bytes; -1 when the notification did not say (Pub/Sub
	// notifications with payloadFormat NONE).
	Size int64
	// EventType is the notification's event ("OBJECT_FINALIZE",
	// "google.cloud.storage.object.v1.finalized", "OBJECT_DELETE"...), or
	// "" when unknown.
	EventType string
	// Created is when the object was created (the notification's
	// timeCreated, or the listing's time for a file found by listing);
	// zero when unknown. It dates the lake's end-to-end lag.
	Created time.Time `json:",omitzero"`
}

// URL returns gs://bucket/name.
func (f SourceFile) URL() string { return "gs://" + f.Bucket + "/" + f.Name }

// CloudEvent types ParseNotification understands.
const (
	StorageFinalizedType = "google.cloud.storage.object.v1.finalized"
	PubSubPublishedType  = "google.cloud.pubsub.topic.v1.messagePublished"
)

// ParseNotification parses the data of a CloudEvent announcing a file: an
// Eventarc storage event (StorageObjectData) or a Pub/Sub message carrying a
// Cloud Storage notification. An empty ceType guesses from the shape of data.
func ParseNotification(ceType string, data []byte) (SourceFile, error) {
	switch {
	case strings.HasPrefix(ceType, "google.cloud.storage.object.v1."):
		f, err := ParseStorageObjectData(data)
		f.EventType = ceType
		return f, err
	case ceType == PubSubPublishedType:
		return ParsePubSubPush(data)
	case ceType == "":
		var probe struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(data, &probe) == nil && len(probe.Message) > 0 {
			return ParsePubSubPush(data)
		}
		return ParseStorageObjectData(data)
	}
	return SourceFile{}, fmt.Errorf("%w: unsupported event type %q", ErrBadNotification, ceType)
}

// storageObject is the part of StorageObjectData (Eventarc) and of the
// JSON_API_V1 object resource (Pub/Sub) that we use. generation and size are
// int64 encoded as strings, or numbers from some emulators.
type storageObject struct {
	Bucket     string          `json:"bucket"`
	Name       string          `json:"name"`
	Generation json.RawMessage `json:"generation"`
	Size       json.RawMessage `json:"size"`
	// TimeCreated is RFC 3339; a value that does not parse is left out,
	// since it only dates the file.
	TimeCreated string `json:"timeCreated"`
}

// created parses the object's timeCreated, zero when absent or malformed.
func (o storageObject) created() time.Time {
	t, err := time.Parse(time.RFC3339Nano, o.TimeCreated)
	if err != nil {
		return time.Time{}
	}
	return t
}

// ParseStorageObjectData parses Eventarc's StorageObjectData JSON.
func ParseStorageObjectData(data []byte) (SourceFile, error) {
	var o storageObject
	if err := json.Unmarshal(data, &o); err != nil {
		return SourceFile{}, fmt.Errorf("%w: parse storage object data: %w", ErrBadNotification, err)
	}
	f := SourceFile{Bucket: o.Bucket, Name: o.Name, Created: o.created()}
	var err error
	if f.Generation, err = int64Field("generation", o.Generation, true); err != nil {
		return SourceFile{}, err
	}
	if f.Size, err = int64Field("size", o.Size, false); err != nil {
		return SourceFile{}, err
	}
	return f, validateFile(f)
}

// ParsePubSubNotification parses a Cloud Storage notification delivered by
// Pub/Sub: its attributes (bucketId, objectId, objectGeneration, eventType)
// and, with payloadFormat JSON_API_V1, its body (the object resource). The
// attributes win where both speak.
func ParsePubSubNotification(attrs map[string]string, data []byte) (SourceFile, error) {
	f := SourceFile{Bucket: attrs["bucketId"], Name: attrs["objectId"], EventType: attrs["eventType"], Size: -1}
	if g, ok := attrs["objectGeneration"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(g), 10, 64)
		if err != nil {
			return SourceFile{}, fmt.Errorf("%w: attribute objectGeneration %q is not an integer", ErrBadNotification, g)
		}
		f.Generation = n
	}
	if len(bytes.TrimSpace(data)) > 0 && attrs["payloadFormat"] != "NONE" {
		var o storageObject
		if err := json.Unmarshal(data, &o); err != nil {
			return SourceFile{}, fmt.Errorf("%w: parse notification body: %w", ErrBadNotification, err)
		}
		if f.Bucket == "" {
			f.Bucket = o.Bucket
		}
		if f.Name == "" {
			f.Name = o.Name
		}
		f.Created = o.created()
		if f.Generation == 0 {
			g, err := int64Field("generation", o.Generation, false)
			if err != nil {
				return SourceFile{}, err
			}
			f.Generation = g
		}
		s, err := int64Field("size", o.Size, false)
		if err != nil {
			return SourceFile{}, err
		}
		if len(o.Size) > 0 {
			f.Size = s
		}
	}
	if f.EventType == "" {
		return SourceFile{}, fmt.Errorf("%w: attribute eventType is missing", ErrBadNotification)
	}
	return f, validateFile(f)
}

// ParsePubSubPush parses a Pub/Sub message envelope, as pushed over HTTP or
// carried in a messagePublished CloudEvent:
// {"message":{"attributes":{...},"data":"<base64>"},"subscription":"..."}.
func ParsePubSubPush(body []byte) (SourceFile, error) {
	var env struct {
		Message struct {
			Attributes map[string]string `json:"attributes"`
			Data       string            `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return SourceFile{}, fmt.Errorf("%w: parse Pub/Sub envelope: %w", ErrBadNotification, err)
	}
	data, err := base64.StdEncoding.DecodeString(env.Message.Data)
	if err != nil {
		return SourceFile{}, fmt.Errorf("%w: message data is not base64: %w", ErrBadNotification, err)
	}
	return ParsePubSubNotification(env.Message.Attributes, data)
}

func int64Field(name string, raw json.RawMessage, required bool) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if required {
			return 0, fmt.Errorf("%w: %s is missing", ErrBadNotification, name)
		}
		return 0, nil
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrBadNotification, name, err)
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s %s is not a non-negative integer", ErrBadNotification, name, raw)
	}
	return n, nil
}

func validateFile(f SourceFile) error {
	if f.Bucket == "" {
		return fmt.Errorf("%w: bucket is missing", ErrBadNotification)
	}
	if f.Name == "" {
		return fmt.Errorf("%w: object name is missing", ErrBadNotification)
	}
	return nil
}

// dataExtensions are the extensions of files Datastream writes data in.
var dataExtensions = []string{".avro", ".jsonl", ".jsonl.gz", ".json", ".json.gz"}

// IsDataFile reports whether name has a Datastream data extension, or no
// extension at all: an extension-less Datastream file name
// ("<schema_key>_oracle-cdc-logminer_21989784_0_0") has been reported, and
// Decode tells the format from the content.
func IsDataFile(name string) bool {
	base := name[strings.LastIndexByte(name, '/')+1:]
	if base != "" && !strings.Contains(base, ".") {
		return true
	}
	l := strings.ToLower(name)
	for _, ext := range dataExtensions {
		if strings.HasSuffix(l, ext) {
			return true
		}
	}
	return false
}

// Skip says whether a notified object must be ignored, and why: events other
// than a finalize, "folder" objects (names ending in /), empty objects, and
// names with an extension other than .avro, .jsonl, .jsonl.gz, .json and
// .json.gz (schema files and the like); see IsDataFile.
func Skip(f SourceFile) (reason string, skip bool) {
	switch f.EventType {
	case "", "OBJECT_FINALIZE", StorageFinalizedType:
	default:
		return "event " + f.EventType + " is not an object finalize", true
	}
	switch {
	case strings.HasSuffix(f.Name, "/"):
		return "name ends in / (a folder placeholder)", true
	case f.Size == 0:
		return "object is empty", true
	case !IsDataFile(f.Name):
		return "not a data file (extension is not .avro, .jsonl, .jsonl.gz, .json or .json.gz)", true
	}
	return "", false
}
