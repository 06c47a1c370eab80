package codec

// The payload converter every tacp client and worker uses, chosen by the environment.

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/converter"
)

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
