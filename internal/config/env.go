package config

import (
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
)

// The variables of the configuration's keys.

// standardEnv are Temporal's own variables, read after CAPFLOW_*.
var standardEnv = map[string]string{
	"temporal.address":         "TEMPORAL_ADDRESS",
	"temporal.namespace":       "TEMPORAL_NAMESPACE",
	"temporal.api_key":         "TEMPORAL_API_KEY",
	"temporal.tls.cert":        "TEMPORAL_TLS_CERT",
	"temporal.tls.key":         "TEMPORAL_TLS_KEY",
	"temporal.tls.ca":          "TEMPORAL_TLS_CA",
	"temporal.tls.server_name": "TEMPORAL_TLS_SERVER_NAME",
	"temporal.tls.enabled":     "TEMPORAL_TLS",
}

// EnvName is the CAPFLOW_* variable of a key.
func EnvName(key string) string {
	return "CAPFLOW_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(key))
}

// envNames are the variables of a key, the first one winning.
func envNames(key string) []string {
	if std, ok := standardEnv[key]; ok {
		return []string{EnvName(key), std}
	}
	return []string{EnvName(key)}
}

// checkEnv refuses a variable whose key wants a boolean or a number and
// that holds neither, naming the variable (viper would name only the key,
// in its decoder's words).
func checkEnv() error {
	keys := slices.Sorted(maps.Keys(defaults))
	for _, k := range keys {
		for _, name := range envNames(k) {
			val := os.Getenv(name)
			if val == "" {
				continue // viper takes an empty variable as unset
			}
			var err error
			want := ""
			switch defaults[k].(type) {
			case bool:
				_, err = strconv.ParseBool(val)
				want = "true or false"
			case int:
				_, err = strconv.ParseInt(val, 0, 0)
				want = "a whole number"
			}
			if err != nil {
				return caperr.New(caperr.ConfigError, "%s=%q is not %s", name, val, want).At("environment", 0, 0, k)
			}
		}
	}
	return nil
}
