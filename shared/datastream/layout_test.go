package datastream

import (
	"testing"
	"time"
)

func TestStreamPrefixIsTheNameWithoutTheLayoutTail(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a stream under a root path", "sales-db/dbo_orders/2026/01/05/10/00/f_sqlserver-cdc_1_0_0.jsonl", "sales-db/"},
		{"a stream under a deeper root path", "datastream/sales/public_t/2024/06/13/11/19/x.avro", "datastream/sales/"},
		{"a stream at the bucket root", "shop_t/2026/01/05/10/00/a.jsonl", ""},
		{"a name of another shape gives its directory", "misc/files/a.jsonl", "misc/files/"},
		{"a name without a folder gives the root", "a.jsonl", ""},
		{"time folders of the wrong width are another shape", "p/o/2026/1/05/10/00/a.jsonl", "p/o/2026/1/05/10/00/"},
		{"an impossible minute folder is another shape", "p/o/2026/13/05/10/00/a.jsonl", "p/o/2026/13/05/10/00/"},
		{"a folder object is another shape", "p/o/2026/01/05/10/00/", "p/o/2026/01/05/10/00/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StreamPrefix(tt.in); got != tt.want {
				t.Errorf("StreamPrefix(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseObjectPathReadsTheFolders(t *testing.T) {
	p, ok := ParseObjectPath("root/x/public_t/2024/06/13/11/19/f.avro")
	want := ObjectPath{Prefix: "root/x/", Object: "public_t", Folder: time.Date(2024, 6, 13, 11, 19, 0, 0, time.UTC), File: "f.avro"}
	if !ok || p != want {
		t.Fatalf("ParseObjectPath = %+v %v, want %+v", p, ok, want)
	}
}
