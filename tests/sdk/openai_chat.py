"""SDK oracle: drives ladle with the official `openai` Python SDK and LangChain.

Usage: python openai_chat.py SCENARIO, with LADLE_BASE_URL (e.g.
http://127.0.0.1:PORT/v1), LADLE_API_KEY (default sk-test) and LADLE_MODEL_NAME
(default m). Prints one line of JSON saying what the SDK parsed from ladle's
answers; the Rust SDK tests (which start ladle in front of a mock upstream) assert
on it. Anything the SDK raises that a scenario does not expect propagates.
"""

import json
import os
import sys

import openai

BASE_URL = os.environ["LADLE_BASE_URL"]
API_KEY = os.environ.get("LADLE_API_KEY", "sk-test")
MODEL = os.environ.get("LADLE_MODEL_NAME", "m")

client = openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0, timeout=20)

WEATHER_MESSAGES = [{"role": "user", "content": "weather in Paris and Tokyo?"}]
WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def dump(value):
    return value.model_dump() if value is not None else None


def tools():
    completion = client.chat.completions.create(
        model=MODEL, messages=WEATHER_MESSAGES, tools=WEATHER_TOOLS
    )
    choice = completion.choices[0]
    message = choice.message
    calls = None
    if message.tool_calls is not None:
        calls = [
            {
                "id": c.id,
                "type": c.type,
                "name": c.function.name,
                "arguments": c.function.arguments,
                "parsed": json.loads(c.function.arguments),
            }
            for c in message.tool_calls
        ]
    return {
        "content": message.content,
        "refusal": message.refusal,
        "finish_reason": choice.finish_reason,
        "tool_calls": calls,
        "logprobs": dump(choice.logprobs),
        "system_fingerprint": completion.system_fingerprint,
        "usage": dump(completion.usage),
    }


def tools_stream():
    stream = client.chat.completions.create(
        model=MODEL, messages=WEATHER_MESSAGES, tools=WEATHER_TOOLS, stream=True
    )
    chunks = deltas = 0
    finish_reason = None
    calls = {}  # index -> the first delta of that index, arguments concatenated
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            if choice.finish_reason is not None:
                finish_reason = choice.finish_reason
            if choice.delta.tool_calls:
                deltas += 1
                for d in choice.delta.tool_calls:
                    if d.index not in calls:
                        calls[d.index] = {
                            "id": d.id,
                            "type": d.type,
                            "name": d.function.name if d.function else None,
                            "arguments": "",
                        }
                    if d.function and d.function.arguments:
                        calls[d.index]["arguments"] += d.function.arguments
    tool_calls = [calls[i] for i in sorted(calls)]
    for c in tool_calls:
        c["parsed"] = json.loads(c["arguments"])

    with client.chat.completions.stream(
        model=MODEL, messages=WEATHER_MESSAGES, tools=WEATHER_TOOLS
    ) as helper:
        final = helper.get_final_completion()
    helper_calls = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in final.choices[0].message.tool_calls or []
    ]
    return {
        "chunks": chunks,
        "tool_call_deltas": deltas,
        "tool_calls": tool_calls,
        "finish_reason": finish_reason,
        "helper_tool_calls": helper_calls,
    }


def refusal():
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "say something harmful"}]
    )
    choice = completion.choices[0]
    return {
        "content": choice.message.content,
        "refusal": choice.message.refusal,
        "finish_reason": choice.finish_reason,
        "logprobs": dump(choice.logprobs),
    }


def status_error():
    try:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}]
        )
    except openai.APIStatusError as e:
        return {"class": type(e).__name__, "status": e.status_code, "body": e.body}
    return {"class": None}


def models():
    page = list(client.models.list())
    out = {
        "ids": [m.id for m in page],
        "objects": [m.object for m in page],
        "owned_by": [m.owned_by for m in page],
    }
    out["retrieved"] = client.models.retrieve(page[0].id).id
    return out


def langchain_tools():
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return "sunny"

    llm = ChatOpenAI(
        base_url=BASE_URL,
        api_key=API_KEY,
        model=MODEL,
        max_retries=0,
        timeout=20,
        use_responses_api=False,
    )
    msg = llm.bind_tools([get_weather]).invoke("weather in Paris?")
    return {
        "tool_calls": msg.tool_calls,
        "invalid_tool_calls": msg.invalid_tool_calls,
        "content": msg.content,
    }


SCENARIOS = {
    "tools": tools,
    "tools_stream": tools_stream,
    "refusal": refusal,
    "bad_request": status_error,
    "not_found": status_error,
    "models": models,
    "langchain_tools": langchain_tools,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
