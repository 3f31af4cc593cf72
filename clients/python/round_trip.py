"""A round trip through the Python client generated from the service's OpenAPI document: an agent, an sms
channel, a contact, a pipeline with a deal in it, a message sent to the contact and read back.

    FRONTDESK_URL=http://127.0.0.1:8080 FRONTDESK_API_KEY=fdk_... \
    FRONTDESK_CHANNEL_CONFIG='{"account_sid": ..., "auth_token": ..., "from_number": ...}' \
    python3 round_trip.py

The client is generated first (see the README): `openapi-python-client generate --url URL/openapi.json`.
"""

import json
import os
import sys
from typing import TypeVar

from frontdesk_client import AuthenticatedClient
from frontdesk_client.api.agents import create_agent
from frontdesk_client.api.channels import connect_channel
from frontdesk_client.api.contacts import create_contact
from frontdesk_client.api.deals import create_deal, get_deal
from frontdesk_client.api.messages import get_message, send_message
from frontdesk_client.api.pipelines import create_pipeline
from frontdesk_client.models import (
    AgentAnswer,
    ChannelAnswer,
    ConnectChannelRequest,
    ConnectChannelRequestConfigType0,
    ConnectChannelRequestType,
    ContactAnswer,
    CreateAgentRequest,
    CreateContactRequest,
    CreateDealRequest,
    CreatePipelineRequest,
    DealAnswer,
    ErrorResponse,
    MessageAccepted,
    MessageAnswer,
    NewStage,
    PipelineAnswer,
    SendMessageRequest,
)
from frontdesk_client.types import Response

T = TypeVar("T")


def expect(response: Response[ErrorResponse | T], answer: type[T]) -> T:
    """The answer of a call that must succeed; the error body otherwise."""
    parsed = response.parsed
    if not isinstance(parsed, answer):
        sys.exit(f"expected {answer.__name__}, got {response.status_code}: {response.content!r}")
    return parsed


def main() -> None:
    client = AuthenticatedClient(base_url=os.environ["FRONTDESK_URL"], token=os.environ["FRONTDESK_API_KEY"])
    config = ConnectChannelRequestConfigType0.from_dict(json.loads(os.environ["FRONTDESK_CHANNEL_CONFIG"]))
    with client:
        agent = expect(
            create_agent.sync_detailed(client=client, body=CreateAgentRequest(name="Front desk (Python)")),
            AgentAnswer,
        ).agent
        expect(
            connect_channel.sync_detailed(
                client=client,
                body=ConnectChannelRequest(name="sms", type_=ConnectChannelRequestType.SMS, config=config),
            ),
            ChannelAnswer,
        )
        contact = expect(
            create_contact.sync_detailed(
                client=client, body=CreateContactRequest(name="Asha Rao", phone="+15555550101")
            ),
            ContactAnswer,
        ).contact
        pipeline = expect(
            create_pipeline.sync_detailed(
                client=client,
                body=CreatePipelineRequest(
                    id="python", name="Python", stages=[NewStage(id="py-lead", name="Lead")]
                ),
            ),
            PipelineAnswer,
        ).pipeline
        deal = expect(
            create_deal.sync_detailed(
                client=client,
                body=CreateDealRequest(
                    title="Annual plan", stage=pipeline.stages[0].id, contact_id=contact.id, value=1200.0
                ),
            ),
            DealAnswer,
        ).deal
        read_deal = expect(get_deal.sync_detailed(deal.id, client=client), DealAnswer).deal
        assert read_deal.pipeline_id == pipeline.id, read_deal
        sent = expect(
            send_message.sync_detailed(
                contact.id, client=client, body=SendMessageRequest(text="Your plan is ready", channel="sms")
            ),
            MessageAccepted,
        )
        message = expect(get_message.sync_detailed(sent.message_id, client=client), MessageAnswer).message
        assert message.text == "Your plan is ready", message
        print(f"round trip ok: agent {agent.id}, deal {deal.id} in {pipeline.id}, message {message.id}")


if __name__ == "__main__":
    main()
