package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// AnonymousCaller is the caller of every request to a server without API
// keys; no key may take its name, or it would own their work.
const AnonymousCaller = "anonymous"

// MinKeyLength is the shortest API key accepted: anything shorter is
// guessable.
const MinKeyLength = 16

// APIKey is one accepted API key and the name recorded as the caller in
// the audit trail. Its String never shows the secret.
type APIKey struct {
	Name   string
	Secret string
}

// String is the key's name, safe to log.
func (k APIKey) String() string { return k.Name }

// ParseKey parses an entry of PYEXEC_API_KEYS or of the keys file: either
// "secret", named after a hash prefix of the secret ("key-1a2b3c4d"), or
// "name:secret".
func ParseKey(entry string) (APIKey, error) {
	entry = strings.TrimSpace(entry)
	name, secret, named := strings.Cut(entry, ":")
	if !named {
		secret = entry
		sum := sha256.Sum256([]byte(secret))
		name = "key-" + hex.EncodeToString(sum[:4])
	}
	if named && name == "" {
		return APIKey{}, fmt.Errorf("an API key entry has an empty name before ':'")
	}
	if len(secret) < MinKeyLength {
		// Never echo the secret; the name (or its position) is enough.
		return APIKey{}, fmt.Errorf("API key %q is %d characters long; at least %d are required", name, len(secret), MinKeyLength)
	}
	return APIKey{Name: name, Secret: secret}, nil
}

// Admins returns the set of key names that are operators.
func (c *Config) Admins() map[string]bool {
	out := make(map[string]bool, len(c.AdminKeys))
	for _, n := range c.AdminKeys {
		out[strings.TrimSpace(n)] = true
	}
	return out
}

// checkAdmins accepts admin names only when each names one of keys: an
// operator role for a key that does not exist is a typo, not a setting.
func checkAdmins(admins []string, keys []APIKey) error {
	if len(admins) > 0 && len(keys) == 0 {
		return fmt.Errorf("names operator keys but no API key is configured (PYEXEC_API_KEYS)")
	}
	for _, n := range admins {
		n = strings.TrimSpace(n)
		if !slices.ContainsFunc(keys, func(k APIKey) bool { return k.Name == n }) {
			return fmt.Errorf("%q is not the name of a configured API key", n)
		}
	}
	return nil
}

// Keys parses every entry of APIKeys. An empty result means the server
// runs without authentication.
func (c *Config) Keys() ([]APIKey, error) {
	keys := make([]APIKey, 0, len(c.APIKeys))
	seen := make(map[string]bool, len(c.APIKeys))
	for _, e := range c.APIKeys {
		k, err := ParseKey(e)
		if err != nil {
			return nil, err
		}
		if k.Name == AnonymousCaller {
			return nil, fmt.Errorf("API key name %q is reserved for the caller of a server without keys", k.Name)
		}
		if seen[k.Name] {
			return nil, fmt.Errorf("API key name %q is used twice", k.Name)
		}
		seen[k.Name] = true
		keys = append(keys, k)
	}
	return keys, nil
}
