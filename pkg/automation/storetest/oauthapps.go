package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"flowservice/pkg/automation"
)

// RunOAuthApps is the contract of automation.OAuthAppStore; open returns
// an empty store.
func RunOAuthApps(t *testing.T, open func(t *testing.T) automation.OAuthAppStore) {
	ctx := context.Background()
	app := func(name string) automation.OAuthApp {
		return automation.OAuthApp{
			Name: name, ClientID: "client-" + name, AuthorizeURL: "https://idp.example/authorize",
			TokenURL: "https://idp.example/token", Scopes: []string{"read", "write"}, Created: now(),
		}
	}
	t.Run("put get list delete", func(t *testing.T) {
		s := open(t)
		if apps, err := s.OAuthApps(ctx); err != nil || len(apps) != 0 {
			t.Fatalf("empty store: OAuthApps = %v, %v; want none", apps, err)
		}
		b, a := app("beta"), app("alpha")
		a.Scopes = []string{}
		for _, x := range []automation.OAuthApp{b, a} {
			if err := s.PutOAuthApp(ctx, x); err != nil {
				t.Fatalf("PutOAuthApp %s: %v", x.Name, err)
			}
		}
		got, err := s.OAuthApp(ctx, "beta")
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Errorf("OAuthApp(beta) = %+v, %v; want %+v", got, err, b)
		}
		apps, err := s.OAuthApps(ctx)
		if err != nil || !reflect.DeepEqual(apps, []automation.OAuthApp{a, b}) {
			t.Errorf("OAuthApps = %+v, %v; want alpha then beta as stored", apps, err)
		}
		if err := s.DeleteOAuthApp(ctx, "alpha"); err != nil {
			t.Fatalf("DeleteOAuthApp: %v", err)
		}
		if _, err := s.OAuthApp(ctx, "alpha"); !errors.Is(err, automation.ErrNotFound) {
			t.Errorf("OAuthApp after delete: err = %v, want ErrNotFound", err)
		}
		if err := s.DeleteOAuthApp(ctx, "alpha"); !errors.Is(err, automation.ErrNotFound) {
			t.Errorf("second DeleteOAuthApp: err = %v, want ErrNotFound", err)
		}
	})
	t.Run("name taken", func(t *testing.T) {
		s := open(t)
		if err := s.PutOAuthApp(ctx, app("gh")); err != nil {
			t.Fatal(err)
		}
		other := app("gh")
		other.ClientID = "someone else"
		if err := s.PutOAuthApp(ctx, other); !errors.Is(err, automation.ErrConflict) {
			t.Errorf("PutOAuthApp of a taken name: err = %v, want ErrConflict", err)
		}
		if got, _ := s.OAuthApp(ctx, "gh"); got.ClientID != "client-gh" {
			t.Errorf("the first app was overwritten: %+v", got)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := open(t).OAuthApp(ctx, "nope"); !errors.Is(err, automation.ErrNotFound) {
			t.Errorf("OAuthApp(nope): err = %v, want ErrNotFound", err)
		}
	})
}
