package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRegisterOrder: pre-registered credentials win, then a Client ID Metadata
// Document where the server supports them, then Dynamic Client Registration as a
// native app; with none of them, a clear error.
func TestRegisterOrder(t *testing.T) {
	var asked map[string]any
	dcr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&asked)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"client_id":"dyn","client_secret":"dyn-secret","token_endpoint_auth_method":"client_secret_post"}`))
	}))
	defer dcr.Close()
	const redirect = "http://127.0.0.1:5/callback"
	tests := []struct {
		name       string
		md         ServerMetadata
		cfg        ClientConfig
		wantID     string
		wantMethod string
		wantErr    bool
	}{
		{"pre-registered with a secret", ServerMetadata{RegistrationEndpoint: dcr.URL, ClientIDMetadataDocumentSupported: true},
			ClientConfig{ClientID: "pre", ClientSecret: "s", MetadataURL: "https://n.example/c.json"}, "pre", AuthBasic, false},
		{"pre-registered, post only", ServerMetadata{TokenEndpointAuthMethodsSupported: []string{AuthPost}},
			ClientConfig{ClientID: "pre", ClientSecret: "s"}, "pre", AuthPost, false},
		{"pre-registered public", ServerMetadata{}, ClientConfig{ClientID: "pre"}, "pre", AuthNone, false},
		{"metadata document", ServerMetadata{RegistrationEndpoint: dcr.URL, ClientIDMetadataDocumentSupported: true},
			ClientConfig{MetadataURL: "https://n.example/c.json"}, "https://n.example/c.json", AuthNone, false},
		{"metadata document unsupported: DCR", ServerMetadata{RegistrationEndpoint: dcr.URL},
			ClientConfig{MetadataURL: "https://n.example/c.json"}, "dyn", AuthPost, false},
		{"nothing usable", ServerMetadata{Issuer: "https://as.example"}, ClientConfig{}, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			c, err := Register(context.Background(), http.DefaultClient, &tc.md, tc.cfg, redirect)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got client %+v, want an error", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ID != tc.wantID || c.AuthMethod != tc.wantMethod || c.RedirectURI != redirect {
				t.Errorf("got %+v, want id %q method %q", c, tc.wantID, tc.wantMethod)
			}
			if c.ID == "dyn" && (asked["application_type"] != "native" || asked["token_endpoint_auth_method"] != AuthNone) {
				t.Errorf("the registration asked %v, want a native public client", asked)
			}
		})
	}
}
