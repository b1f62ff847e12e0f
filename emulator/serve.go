package main

import (
	"fmt"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	// The root package registers OnFile, Merge and Compact, exactly as a
	// Cloud Functions source deploy (the Go buildpack) builds them.
	_ "github.com/dsdelta/dsdelta"
)

// serveEnv marks a process started by the stack to serve one function.
const serveEnv = "DSDELTA_EMULATOR_SERVE"

// isFunctionServer reports whether this process was started to serve a
// function rather than to run the stack.
func isFunctionServer() bool { return os.Getenv(serveEnv) != "" }

// serveFunction serves the function named by FUNCTION_TARGET on
// 127.0.0.1:$PORT through functions-framework-go, as the Cloud Functions
// runtime does. Its supervisor ends it when the stack stops or dies.
func serveFunction() error {
	target, port := os.Getenv("FUNCTION_TARGET"), os.Getenv("PORT")
	if target == "" || port == "" {
		return fmt.Errorf("%s needs FUNCTION_TARGET and PORT", serveEnv)
	}
	return funcframework.StartHostPort("127.0.0.1", port)
}
