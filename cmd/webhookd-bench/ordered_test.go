package main

import (
	"encoding/json"
	"testing"
)

func TestKeyedPayload(t *testing.T) {
	p := keyedPayloadFor("run", 7, 100, 42)
	var v struct {
		Seq int    `json:"seq"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal(p, &v); err != nil || v.Seq != 7 || v.Key != "k-42" || len(p) != 100 {
		t.Fatalf("payload %s (%d bytes): %+v, %v", p, len(p), v, err)
	}
}
