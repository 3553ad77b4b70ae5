package agent_test

import (
	"io"
	"net/http"
)

type httpGetter struct{}

func (httpGetter) get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
