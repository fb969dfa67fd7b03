"""Agent frameworks asking people through slack-ask: LangGraph / LangChain, the OpenAI Agents SDK and
the Claude Agent SDK (docs/integrations.md).

Each framework is an optional extra and is imported only inside its own module
(``bot.integrations.langgraph``, ``openai_agents``, ``claude_agent``); what they share
(``bot.integrations.common``) imports none of them.
"""
