// A real OpenID Connect provider for PyClassroom's tests: zitadel/oidc's
// example provider (in-memory, a username and password form), with the
// clients and users a test gives it in a JSON file.
//
//	oidc_provider -config provider.json [-port 0]
//
// It listens on 127.0.0.1 (port 0: any free one) and prints one line,
// "issuer http://127.0.0.1:PORT/", once it accepts connections.
//
// What it adds to the example: users come from the config file, read again
// at every look-up, so a test can change someone's e-mail between two
// sign-ins; the ID token carries the e-mail, profile and "groups" claims
// (the example leaves them to the userinfo endpoint); clients accept
// redirect addresses by glob, because the servers under test pick their
// ports after the provider has started.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

type clientConfig struct {
	ID            string   `json:"id"`
	Secret        string   `json:"secret"`
	RedirectGlobs []string `json:"redirect_globs"`
}

type userConfig struct {
	ID            string   `json:"id"`
	Username      string   `json:"username"`
	Password      string   `json:"password"`
	GivenName     string   `json:"given_name"`
	FamilyName    string   `json:"family_name"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified"`
	Groups        []string `json:"groups"`
}

type config struct {
	Clients []clientConfig `json:"clients"`
	Users   []userConfig   `json:"users"`
}

func readConfig(path string) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &cfg, nil
}

// fileUsers is the example's UserStore over the config file's users.
type fileUsers struct{ path string }

func (f fileUsers) all() []userConfig {
	cfg, err := readConfig(f.path)
	if err != nil {
		slog.Error("cannot read the users", "error", err)
		return nil
	}
	return cfg.Users
}

func (u userConfig) user() *storage.User {
	return &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, FirstName: u.GivenName,
		LastName: u.FamilyName, Email: u.Email, EmailVerified: u.EmailVerified}
}

func (f fileUsers) find(match func(userConfig) bool) (userConfig, bool) {
	for _, u := range f.all() {
		if match(u) {
			return u, true
		}
	}
	return userConfig{}, false
}

func (f fileUsers) GetUserByID(id string) *storage.User {
	if u, ok := f.find(func(u userConfig) bool { return u.ID == id }); ok {
		return u.user()
	}
	return nil
}

func (f fileUsers) GetUserByUsername(name string) *storage.User {
	if u, ok := f.find(func(u userConfig) bool { return u.Username == name }); ok {
		return u.user()
	}
	return nil
}

func (f fileUsers) ExampleClientID() string { return storage.ServiceUserID }

// claimsClient: the registered client, with the userinfo claims in its ID
// tokens and its redirect addresses matched by glob.
type claimsClient struct {
	op.Client
	globs []string
}

func (c claimsClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c claimsClient) RedirectURIGlobs() []string           { return c.globs }
func (c claimsClient) PostLogoutRedirectURIGlobs() []string { return nil }

type store struct {
	*storage.Storage
	users fileUsers
	globs map[string][]string
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	client, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return claimsClient{client, s.globs[id]}, nil
}

// SetUserinfoFromRequest fills the ID token's claims: the example's, and the groups.
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, token, scopes); err != nil {
		return err
	}
	if u, ok := s.users.find(func(u userConfig) bool { return u.ID == token.GetSubject() }); ok && len(u.Groups) > 0 {
		info.AppendClaims("groups", u.Groups)
	}
	return nil
}

func main() {
	configPath := flag.String("config", "", "JSON file of clients and users")
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: any free one)")
	flag.Parse()
	cfg, err := readConfig(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidc_provider:", err)
		os.Exit(2)
	}
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidc_provider:", err)
		os.Exit(2)
	}
	issuer := fmt.Sprintf("http://127.0.0.1:%d/", listener.Addr().(*net.TCPAddr).Port)

	globs := map[string][]string{}
	for _, c := range cfg.Clients {
		storage.RegisterClients(storage.WebClient(c.ID, c.Secret, c.RedirectGlobs...))
		globs[c.ID] = c.RedirectGlobs
	}
	users := fileUsers{*configPath}
	s := &store{Storage: storage.NewStorage(users), users: users, globs: globs}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(issuer, s, logger, false)

	fmt.Printf("issuer %s\n", issuer)
	if err := http.Serve(listener, router); err != nil {
		fmt.Fprintln(os.Stderr, "oidc_provider:", err)
		os.Exit(1)
	}
}
