"""SDK oracle for the Responses API: drives ladle's `POST /v1/responses` with the
official `openai` Python SDK.

Usage: python openai_responses.py SCENARIO, with LADLE_BASE_URL,
LADLE_API_KEY (default sk-test) and LADLE_MODEL_NAME (default m). Prints one line
of JSON saying what the SDK parsed; the Rust tests (tests/api/openai/responses.rs)
assert on it. Anything the SDK raises that a scenario does not expect propagates.
"""

import json
import os
import sys

import openai

BASE_URL = os.environ["LADLE_BASE_URL"]
API_KEY = os.environ.get("LADLE_API_KEY", "sk-test")
MODEL = os.environ.get("LADLE_MODEL_NAME", "m")

client = openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0, timeout=20)


def create():
    response = client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": "番茄炒蛋怎么做？"}],
        instructions="你是一位中餐厨师",
        text={"format": {"type": "json_object"}},
        metadata={"dish": "番茄炒蛋"},
    )
    return {
        "id": response.id,
        "status": response.status,
        "output_text": response.output_text,
        "reasoning": [
            part.text
            for item in response.output
            if item.type == "reasoning"
            for part in (item.content or [])
        ],
        "usage": response.usage.model_dump() if response.usage else None,
        "metadata": response.metadata,
        "instructions": response.instructions,
    }


def stream():
    events = client.responses.create(model=MODEL, input="番茄炒蛋怎么做？", stream=True)
    kinds, numbers, text, final = [], [], "", None
    for event in events:
        kinds.append(event.type)
        numbers.append(event.sequence_number)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    return {
        "types": kinds,
        "sequence_numbers": numbers,
        "text": text,
        "final_status": final.status if final else None,
        "final_text": final.output_text if final else None,
        "final_error": final.error.model_dump() if final and final.error else None,
    }


def helper():
    with client.responses.stream(model=MODEL, input="番茄炒蛋怎么做？") as events:
        deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
        final = events.get_final_response()
    return {"deltas": "".join(deltas), "output_text": final.output_text, "status": final.status}


def failed():
    try:
        client.responses.create(model=MODEL, input="番茄炒蛋怎么做？")
    except openai.APIStatusError as error:
        return {"class": type(error).__name__, "status": error.status_code, "code": error.body.get("code") if isinstance(error.body, dict) else None}
    return {"class": None}


def refused():
    try:
        client.responses.create(
            model=MODEL,
            input="weather?",
            tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        )
    except openai.APIStatusError as error:
        message = error.body.get("message") if isinstance(error.body, dict) else str(error)
        return {"class": type(error).__name__, "status": error.status_code, "message": message}
    return {"class": None}


def background():
    events = client.responses.create(
        model=MODEL, input="番茄炒蛋怎么做？", background=True, stream=True
    )
    response_id, last, text, first = None, None, "", []
    for event in events:
        first.append(event.sequence_number)
        if event.type == "response.created":
            response_id = event.response.id
            created_status = event.response.status
        last = event.sequence_number
        if event.type == "response.output_text.delta":
            text += event.delta
            if len(text) >= 3:
                break
    events.close()
    resumed = client.responses.retrieve(response_id, stream=True, starting_after=last)
    after, numbers, final = "", [], None
    for event in resumed:
        numbers.append(event.sequence_number)
        if event.type == "response.output_text.delta":
            after += event.delta
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    whole = [event.model_dump() for event in client.responses.retrieve(response_id, stream=True)]
    again = [event.model_dump() for event in client.responses.retrieve(response_id, stream=True)]
    retrieved = client.responses.retrieve(response_id)
    return {
        "id": response_id,
        "created_status": created_status,
        "before": text,
        "after": after,
        "numbers": first + numbers,
        "final_status": final.status if final else None,
        "retrieved_status": retrieved.status,
        "retrieved_text": retrieved.output_text,
        "readings_equal": whole == again,
        "reading_numbers": [event["sequence_number"] for event in whole],
    }


def cancel():
    response = client.responses.create(model=MODEL, input="番茄炒蛋怎么做？", background=True)
    cancelled = client.responses.cancel(response.id)
    again = client.responses.retrieve(response.id)
    return {"created": response.status, "cancelled": cancelled.status, "retrieved": again.status}


def previous():
    import time

    first = client.responses.create(
        model=MODEL, input="番茄炒蛋怎么做？", instructions="只说中文", background=True
    )
    for _ in range(200):
        first = client.responses.retrieve(first.id)
        if first.status == "completed":
            break
        time.sleep(0.02)
    second = client.responses.create(
        model=MODEL, input="再简单一点", previous_response_id=first.id
    )
    return {
        "first": first.status,
        "second_text": second.output_text,
        "previous_response_id": second.previous_response_id,
        "first_id": first.id,
    }


def status_of(call):
    """The HTTP status a call ends with: 200, or the status error's."""
    try:
        call()
    except openai.APIStatusError as error:
        return error.status_code
    return 200


def stored():
    first = client.responses.create(model=MODEL, input="番茄炒蛋怎么做？", instructions="只说中文")
    retrieved = client.responses.retrieve(first.id)
    second = client.responses.create(
        model=MODEL, input="再简单一点", previous_response_id=first.id, stream=True
    )
    second_id = None
    for event in second:
        if event.type == "response.completed":
            second_id = event.response.id
    # Retrieved the moment its stream ended: it was kept before its last event.
    second_retrieved = client.responses.retrieve(second_id)
    unstored = client.responses.create(model=MODEL, input="x", store=False)
    stream_of_a_plain_one = status_of(lambda: list(client.responses.retrieve(first.id, stream=True)))
    deleted = client.responses.delete(first.id)
    return {
        "first_status": first.status,
        "retrieved_status": retrieved.status,
        "retrieved_equal": retrieved.model_dump() == first.model_dump(),
        "second_text": second_retrieved.output_text,
        "second_previous": second_retrieved.previous_response_id,
        "first_id": first.id,
        "stream_of_a_plain_one": stream_of_a_plain_one,
        "unstored_retrieve": status_of(lambda: client.responses.retrieve(unstored.id)),
        "deleted": deleted,
        "retrieve_after_delete": status_of(lambda: client.responses.retrieve(first.id)),
        "delete_again": status_of(lambda: client.responses.delete(first.id)),
        "second_still_there": status_of(lambda: client.responses.retrieve(second_id)),
    }


def deleted():
    response = client.responses.create(model=MODEL, input="番茄炒蛋怎么做？", background=True)
    client.responses.delete(response.id)
    return {
        "created": response.status,
        "retrieve_after_delete": status_of(lambda: client.responses.retrieve(response.id)),
        "cancel_after_delete": status_of(lambda: client.responses.cancel(response.id)),
    }


SCENARIOS = {
    "stored": stored,
    "deleted": deleted,
    "previous": previous,
    "background": background,
    "cancel": cancel,
    "create": create,
    "stream": stream,
    "helper": helper,
    "failed": failed,
    "refused": refused,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](), ensure_ascii=False))
