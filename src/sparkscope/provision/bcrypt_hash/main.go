// Command bcrypt-hash prints the bcrypt hash of the password on its standard
// input (one line; the newline is not part of it). sparkscope writes Thanos'
// web config with it: Thanos asks HTTP clients for Basic auth and checks the
// password against a bcrypt hash only. Built beside Thanos, from the same
// module (provision/go.py), so it needs nothing Thanos does not.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(os.Stderr, "bcrypt-hash: no password on standard input")
		os.Exit(2)
	}
	password := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if password == "" {
		fmt.Fprintln(os.Stderr, "bcrypt-hash: the password is empty")
		os.Exit(2)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bcrypt-hash:", err)
		os.Exit(1)
	}
	fmt.Println(string(hash))
}
