"""Everything that speaks Slack: the Web API gateway, interaction payloads, Block Kit limits."""
