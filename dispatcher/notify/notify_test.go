package notify_test

import (
	"testing"

	"github.com/webhookd/webhookd/dispatcher/notify"
)

func TestNewMailerURLs(t *testing.T) {
	tests := []struct {
		url     string
		wantErr bool
	}{
		{"", false},
		{"smtp://mail.example.com:2525", false},
		{"smtp://user:secret@mail.example.com", false},
		{"smtps://user:secret@mail.example.com:465", false},
		{"http://mail.example.com", true},
		{"smtp://mail.example.com:port", true},
		{"smtp://", true},
	}
	for _, tt := range tests {
		_, err := notify.NewMailer(tt.url, "webhookd@example.com", nil, nil)
		if (err != nil) != tt.wantErr {
			t.Errorf("NewMailer(%q) error %v, want error %v", tt.url, err, tt.wantErr)
		}
	}
}
