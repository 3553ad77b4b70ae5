package main

import "github.com/scrubd/scrubd/agent/cli"

func init() {
	register("run", "run the agent: --sim (simulated NIC, no config) or --config FILE", cli.Run)
	register("plan", "software capacity vs line rate per frame size (placement model)", cli.Plan)
	register("rules", "list, get, add, delete or replace rules through the agent's API", cli.Rules)
	register("config", "config check FILE: validate a config without touching anything", cli.Config)
}
