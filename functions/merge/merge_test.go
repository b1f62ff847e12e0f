package merge

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

func ce(t *testing.T, data string) event.Event {
	t.Helper()
	e := event.New()
	e.SetID("1")
	e.SetType("google.cloud.pubsub.topic.v1.messagePublished")
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/wake")
	if err := e.SetData("application/json", []byte(data)); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTable(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(`{"table":"shop.customers"}`))
	cases := []struct {
		name, data, want string
		bad              bool
	}{
		{"a Pub/Sub message with JSON data names the table", `{"message":{"data":"` + b64 + `"},"subscription":"s"}`, "shop.customers", false},
		{"the table attribute wins", `{"message":{"data":"","attributes":{"table":"HR.EMPLOYEES"}}}`, "HR.EMPLOYEES", false},
		{"bare JSON is accepted", `{"table":"public.orders"}`, "public.orders", false},
		{"a message without a table is refused", `{"message":{"data":"e30="}}`, "", true},
		{"an invalid table id is refused", `{"table":"../etc.passwd"}`, "", true},
		{"garbage is refused", `not json`, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Table(ce(t, c.data))
			if c.bad {
				if err == nil {
					t.Fatalf("accepted %q as %q", c.data, got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Table = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestStaleLease(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ttl := 90 * time.Second
	for _, c := range []struct {
		name    string
		expires time.Time
		want    bool
	}{
		{"a lease renewed a moment ago is live", now.Add(85 * time.Second), false},
		{"a lease due for renewal is still live", now.Add(60 * time.Second), false},
		{"a lease not renewed for over a TTL/2 looks abandoned", now.Add(40 * time.Second), true},
		{"an expired lease is abandoned", now.Add(-time.Second), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := staleLease(c.expires, now, ttl); got != c.want {
				t.Fatalf("staleLease = %v, want %v", got, c.want)
			}
		})
	}
}
