package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// droppedValues lists the places of raw where the JSON holds a value the
// API does not return: 0, false, "" and [] are proto3 defaults, left out
// of the dashboard it stores. The provider compares what it reads back
// with the configuration key by key, so each of them shows as a change on
// every plan (hashicorp/terraform-provider-google#16173): leave them out.
func droppedValues(raw string) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var out []string
	walkDefaults("", v, &out)
	return out, nil
}

func walkDefaults(path string, v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkDefaults(path+"."+k, x[k], out)
		}
	case []any:
		if len(x) == 0 {
			*out = append(*out, fmt.Sprintf("%s is [], which the API drops", path))
		}
		for i, e := range x {
			walkDefaults(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	case json.Number:
		if f, err := x.Float64(); err == nil && f == 0 {
			*out = append(*out, fmt.Sprintf("%s is 0, which the API drops", path))
		}
	case bool:
		if !x {
			*out = append(*out, fmt.Sprintf("%s is false, which the API drops", path))
		}
	case string:
		if x == "" {
			*out = append(*out, fmt.Sprintf("%s is \"\", which the API drops", path))
		}
	}
}
