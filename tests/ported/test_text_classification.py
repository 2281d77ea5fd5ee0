"""PyTorch's text-classification tutorial (AG_NEWS with nn.EmbeddingBag), on synthetic token data made in NumPy in
place of the dataset download: sentences of varying length whose tokens are drawn from class-dependent
distributions, batched by a collate function into one flat token tensor with offsets, a bag-of-embeddings model
initialized with uniform_ under torch's seed, trained with SGD, gradient clipping and StepLR (stepped when the
validation accuracy stops improving), over a random_split and shuffling DataLoaders, then evaluated and used to
predict. Everything random comes from torch's generator, so the same seed gives both libraries the same numbers."""

import numpy as np
import pytest

from ._harness import run_both

VOCAB, CLASSES = 120, 4
FLOAT32 = {"rtol": 2e-4, "atol": 2e-5}


def synthetic_news(rng, count):
    """(label, token ids) pairs: each class favours its own quarter of the vocabulary; lengths 3 to 17 tokens."""
    samples = []
    for _ in range(count):
        label = int(rng.integers(0, CLASSES))
        length = int(rng.integers(3, 18))
        favoured = rng.integers(label * VOCAB // CLASSES, (label + 1) * VOCAB // CLASSES, length)
        noise = rng.integers(0, VOCAB, length)
        samples.append((label + 1, np.where(rng.random(length) < 0.6, favoured, noise)))  # AG_NEWS labels are 1-4
    return samples


def text_classification_program(torch, nn, F, optim, data, train_iter, test_iter):
    torch.manual_seed(0)
    label_pipeline = lambda x: int(x) - 1  # noqa: E731

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(label_pipeline(_label))
            processed_text = torch.tensor(_text, dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list, text_list, offsets

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)
            self.init_weights()

        def init_weights(self):
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            embedded = self.embedding(text, offsets)
            return self.fc(embedded)

    model = TextClassificationModel(VOCAB, 16, CLASSES)
    record = {"initial_embedding": model.embedding.weight.detach().clone(), "batch_losses": [], "lr": []}

    def train(dataloader):
        model.train()
        total_acc, total_count = 0, 0
        for label, text, offsets in dataloader:
            optimizer.zero_grad()
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            loss.backward()
            record["batch_losses"].append(loss.detach())
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
        return total_acc / total_count

    def evaluate(dataloader):
        model.eval()
        total_acc, total_count, losses = 0, 0, []
        with torch.no_grad():
            for label, text, offsets in dataloader:
                predicted_label = model(text, offsets)
                losses.append(criterion(predicted_label, label))
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count, torch.stack(losses)

    EPOCHS, LR, BATCH_SIZE = 3, 5, 16
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    total_accu = None
    train_dataset, test_dataset = list(train_iter), list(test_iter)
    num_train = int(len(train_dataset) * 0.95)
    split_train_, split_valid_ = data.random_split(train_dataset, [num_train, len(train_dataset) - num_train])
    train_dataloader = data.DataLoader(split_train_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
    valid_dataloader = data.DataLoader(split_valid_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
    test_dataloader = data.DataLoader(test_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)

    accuracies = []
    for _epoch in range(1, EPOCHS + 1):
        train_accuracy = train(train_dataloader)
        accu_val, _ = evaluate(valid_dataloader)
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val
        accuracies.append((train_accuracy, accu_val))
        record["lr"].append(scheduler.get_last_lr()[0])

    test_accuracy, test_losses = evaluate(test_dataloader)
    with torch.no_grad():
        sample = torch.tensor(test_dataset[0][1], dtype=torch.int64)
        predicted = model(sample, torch.tensor([0])).argmax(1).item() + 1
    return {
        "initial_embedding": record["initial_embedding"],
        "batch_losses": torch.stack(record["batch_losses"]),
        "accuracies": accuracies,
        "lr": record["lr"],
        "test": (test_accuracy, test_losses),
        "predicted": predicted,
        "embedding": model.embedding.weight.detach(),
        "fc": (model.fc.weight.detach(), model.fc.bias.detach()),
    }


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`")
def test_text_classification_tutorial_matches_torch():
    rng = np.random.default_rng(11)
    train_iter, test_iter = synthetic_news(rng, 200), synthetic_news(rng, 48)
    expected, _ = run_both(text_classification_program, train_iter, test_iter, tolerance=FLOAT32)
    assert expected["accuracies"][-1][0] > expected["accuracies"][0][0] or expected["accuracies"][0][0] > 0.9
    assert expected["test"][0] > 0.5  # the classes are learnable from their favoured tokens
