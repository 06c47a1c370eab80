package codec

// The payload converter every tacp client and worker uses, chosen by the environment.

import (
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/converter"
)

// Configured reports whether the environment names encryption keys (TACP_CODEC_KEYS or
// TACP_CODEC_KEY_FILE), valid or not: DataConverterFromEnv reports a bad one.
func Configured() bool {
	return strings.TrimSpace(os.Getenv(EnvKeys)) != "" || os.Getenv(EnvKeyFile) != ""
}

// DataConverterFromEnv is the payload converter of every tacp client and worker: the SDK's
// default, encrypted with the keys of TACP_CODEC_KEYS or TACP_CODEC_KEY_FILE when either is
// set (nil when neither is: the SDK's default applies).
func DataConverterFromEnv() (converter.DataConverter, error) {
	keys, ok, err := LoadKeys(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("payload encryption keys: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return DataConverter(keys), nil
}

// KeysFromEnv is the keyring of TACP_CODEC_KEYS or TACP_CODEC_KEY_FILE (nil when neither is
// set): what seals a workspace checkpoint store as it seals history.
func KeysFromEnv() (*Keys, error) {
	keys, ok, err := LoadKeys(os.Getenv)
	if err != nil || !ok {
		return nil, err
	}
	return &keys, nil
}
